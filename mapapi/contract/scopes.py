"""The scopes an API key may have: everything, or GET and HEAD only.

A module of its own, so that the schemas, the key check and ``mapapi keys
create`` share it without importing each other (the command stays light).
"""

SCOPES = ("READ_ONLY", "READ_WRITE")
