"""``mapapi mcp``: the command that runs the MCP server."""

import click

from ..commands.service_client import key_for, url_option


@click.command("mcp")
@url_option
@click.option(
    "--read-only",
    is_flag=True,
    help="List only the tools that read (the key's scope still applies).",
)
def mcp_command(url, read_only):
    """Serve the API's tools to an AI agent over stdio (MCP); the key comes from MAPAPI_KEY."""
    key = key_for(url, used_by="the agent")
    from .local import run

    run(url, key, read_only)
