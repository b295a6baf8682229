"""The MCP server for AI agents: ``mapapi mcp`` over stdio (``local``, a
client of a running service) and ``/mcp`` on the service's own port
(``remote``, Streamable HTTP). Both serve the same tools (``tools``), built
from the service's OpenAPI document, whose calls are checked
(``arguments``) and answered within bounds (``results``) by ``server``.
"""
