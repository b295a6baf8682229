"""Values printed on a terminal or in a line of output, made harmless.

A value a client wrote (an ``externalId``, a name, a key's name) may hold
control characters: an escape sequence would drive the terminal, a
newline or a tab would break a line-per-record output. ``printable``
writes each as its Python escape (``\\x1b``, ``\\n``, ``\\u2028``), so the
value stays readable and no value can act on the terminal.
"""

import re

_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: With the backslash: the escapes can be told from a value that held them as text.
_CONTROLS_AND_BACKSLASH = re.compile(r"[\\\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(value, *, backslash: bool = False) -> str:
    """``value`` as text, its control characters (and, with ``backslash``,
    its backslashes) escaped."""
    pattern = _CONTROLS_AND_BACKSLASH if backslash else _CONTROLS
    return pattern.sub(_escape, str(value))


def _escape(found: re.Match) -> str:
    return found.group().encode("unicode_escape").decode("ascii")
