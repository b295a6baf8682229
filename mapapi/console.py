"""The ``mapapi`` console script.

``mapapi mcp`` is dispatched before the Flask command group is imported: it
is a client of a running service and needs none of the app, so an agent's
host starts it in about half the time. Every other command is the group in
``cli.py`` (which lists ``mcp`` too, for ``--help``).
"""

import sys


def main() -> None:
    if sys.argv[1:2] == ["mcp"]:
        from .mcp.command import mcp_command

        mcp_command.main(sys.argv[2:], prog_name="mapapi mcp")
    else:
        from .cli import main as command_group

        command_group()
