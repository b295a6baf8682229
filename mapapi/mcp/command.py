"""``mapapi mcp``: the command that runs the MCP server."""

import os
import sys

import click

DEFAULT_URL = "http://127.0.0.1:8080"


@click.command("mcp")
@click.option(
    "--url",
    envvar="MAPAPI_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="The running mapapi service (env MAPAPI_URL).",
)
@click.option(
    "--read-only",
    is_flag=True,
    help="List only the tools that read (the key's scope still applies).",
)
def mcp_command(url, read_only):
    """Serve the API's tools to an AI agent over stdio (MCP); the key comes from MAPAPI_KEY."""
    key = os.environ.get("MAPAPI_KEY", "").strip()
    if not key:
        click.echo(
            "MAPAPI_KEY is not set: put the API key the agent should use in this "
            "environment variable (never on the command line).",
            err=True,
        )
        sys.exit(2)
    if not url.startswith(("http://", "https://")):
        click.echo(
            f"MAPAPI_URL / --url must be an http:// or https:// URL, not {url!r}.",
            err=True,
        )
        sys.exit(2)
    from .local import run

    run(url, key, read_only)
