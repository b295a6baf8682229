"""An environment file read exactly as systemd's ``EnvironmentFile=`` reads it.

``KEY=VALUE`` lines; lines starting with ``#`` or ``;`` and lines without
``=`` are ignored. An unquoted value keeps its inner whitespace and what
follows a ``#`` (an inline comment is part of the value: mapapi then
refuses it); a backslash keeps the next character, and ends a line that
goes on. Single quotes keep everything up to the next one; double quotes
too, but ``\\"``, ``\\\\``, ``\\$`` and ``\\``` stand for the character and a
backslash before a newline joins the lines. Whitespace around a key and
around a value is dropped. (systemd's ``parse_env_file``, state for state.)

``python -m mapapi.envfile FILE COMMAND [ARG...]`` runs a command with the
file as its environment, as the unit's processes get it: the caller's own
``MAPAPI_`` variables are left out. docs/deploy.md's admin wrapper uses it.
"""

import os
import sys

_NEWLINE = "\n\r"
_WHITESPACE = " \t\n\r"
_COMMENT = "#;"
_DOUBLE_QUOTE_ESCAPED = '"\\`$'


class EnvFileError(Exception):
    """The file cannot be read: one line for the operator."""


def read_environment_file(path: str) -> dict[str, str]:
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as error:
        raise EnvFileError(f"{path}: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise EnvFileError(f"{path}: not UTF-8 (byte {error.start})") from None
    return parse_environment(text)


def parse_environment(text: str) -> dict[str, str]:
    """The variables ``text`` assigns, later assignments winning."""
    values: dict[str, str] = {}
    state, key, value = "pre_key", [], []

    def push():
        name = "".join(key).rstrip(_WHITESPACE)
        if name:
            values[name] = "".join(value).rstrip(_WHITESPACE) if state == "value" else "".join(value)

    for char in text:
        if state == "pre_key":
            if char in _COMMENT:
                state = "comment"
            elif char not in _WHITESPACE:
                state, key, value = "key", [char], []
        elif state == "key":
            if char in _NEWLINE:
                state = "pre_key"  # a line without "=" is no assignment
            elif char == "=":
                state = "pre_value"
            else:
                key.append(char)
        elif state == "pre_value":
            if char in _NEWLINE:
                push()
                state = "pre_key"
            elif char == "'":
                state = "single_quote"
            elif char == '"':
                state = "double_quote"
            elif char == "\\":
                state = "value_escape"
            elif char not in _WHITESPACE:
                state = "value"
                value.append(char)
        elif state == "value":
            if char in _NEWLINE:
                push()
                state = "pre_key"
            elif char == "\\":
                state = "value_escape"
            else:
                value.append(char)
        elif state == "value_escape":
            state = "value"
            if char not in _NEWLINE:  # a backslash before a newline joins the lines
                value.append(char)
        elif state == "single_quote":
            if char == "'":
                state = "pre_value"
            else:
                value.append(char)
        elif state == "double_quote":
            if char == '"':
                state = "pre_value"
            elif char == "\\":
                state = "double_quote_escape"
            else:
                value.append(char)
        elif state == "double_quote_escape":
            state = "double_quote"
            if char in _DOUBLE_QUOTE_ESCAPED:
                value.append(char)
            elif char not in _NEWLINE:
                value.extend(("\\", char))
        elif state == "comment":
            if char == "\\":
                state = "comment_escape"
            elif char in _NEWLINE:
                state = "pre_key"
        elif state == "comment_escape":
            state = "comment"
    if state in ("pre_value", "value", "value_escape", "single_quote", "double_quote", "double_quote_escape"):
        if state == "value_escape":
            state = "value"
        push()
    return values


def unit_environment(path: str, environ=os.environ) -> dict[str, str]:
    """The environment a unit with ``EnvironmentFile=path`` gives mapapi:
    the caller's, without its ``MAPAPI_`` variables, and the file's."""
    kept = {name: value for name, value in environ.items() if not name.upper().startswith("MAPAPI_")}
    return {**kept, **read_environment_file(path)}


def main(arguments: list[str]) -> None:
    if len(arguments) < 2:
        print("usage: python -m mapapi.envfile FILE COMMAND [ARG...]", file=sys.stderr)
        sys.exit(2)
    try:
        environment = unit_environment(arguments[0])
    except EnvFileError as error:
        print(f"Error: {error}", file=sys.stderr)
        sys.exit(2)
    os.execvpe(arguments[1], arguments[1:], environment)  # noqa: S606 - the operator's command, as given


if __name__ == "__main__":
    main(sys.argv[1:])
