"""``mapapi mcp``: a Model Context Protocol server over stdio for AI agents.

It is a client of a running mapapi service, like any other: its tools are
built at start-up from the service's OpenAPI document (one tool per
operation, the operation's own input schema), and every call is an HTTP
request with the key from ``MAPAPI_KEY``, so scopes and rate limits apply to
the agent as to anyone.
"""
