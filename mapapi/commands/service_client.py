"""What the commands that are clients of a running service (``mcp``, ``sync``)
share: the service's address and the key, both taken from the environment.

It imports click only: those commands start without the server stack.
"""

import os
import sys

import click

DEFAULT_URL = "http://127.0.0.1:8080"

#: ``--url``: the running service (env ``MAPAPI_URL``).
url_option = click.option(
    "--url",
    envvar="MAPAPI_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="The running mapapi service (env MAPAPI_URL).",
)


def key_for(url: str, *, used_by: str) -> str:
    """The key in ``MAPAPI_KEY``, once the key and ``url`` are both usable.

    Either missing or wrong is refused (``refuse_setting``). ``used_by``
    says whose key it is ("the agent", "the sync").
    """
    key = os.environ.get("MAPAPI_KEY", "").strip()
    if not key:
        refuse_setting(
            f"MAPAPI_KEY is not set: put the API key {used_by} should use in this "
            "environment variable (never on the command line)."
        )
    if not url.startswith(("http://", "https://")):
        refuse_setting(f"MAPAPI_URL / --url must be an http:// or https:// URL, not {url!r}.")
    return key


def refuse_setting(message: str):
    """A setting or option that cannot work: one line on standard error, exit code 2."""
    click.echo(message, err=True)
    sys.exit(2)
