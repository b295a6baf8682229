"""The ``mapapi`` console script.

``mapapi mcp`` and ``mapapi sync`` are dispatched before the Flask command
group is imported: they are clients of a running service and need none of
the app, so they start in about half the time. Every other command is the
group in ``cli.py`` (which lists ``mcp`` and ``sync`` too, for ``--help``).
"""

import sys


def main() -> None:
    if sys.argv[1:2] == ["mcp"]:
        from .mcp.command import mcp_command

        mcp_command.main(sys.argv[2:], prog_name="mapapi mcp")
    elif sys.argv[1:2] == ["sync"]:
        from .filesync.command import sync_command

        sync_command.main(sys.argv[2:], prog_name="mapapi sync")
    else:
        from .cli import main as command_group

        command_group()
