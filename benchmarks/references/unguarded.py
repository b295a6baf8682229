"""mapapi's own app on plain waitress: ``mapapi serve`` without its connection guards.

The guards of ``mapapi serve`` (``mapapi/connections.py``: unread answers
parked, oversized bodies counted and dropped, header, idle and send
deadlines) live in the server, not in the app. Served here by
``waitress.serve`` with the same threads and the same log set-up, the same
app shows what the guards cost a normal request.
Usage: ``python unguarded.py PORT THREADS`` (the settings come from the environment).
"""

import sys

import waitress

from mapapi import create_app
from mapapi.log_output import log_to_stderr

if __name__ == "__main__":
    log_to_stderr()  # as ``mapapi serve`` sets up its log
    waitress.serve(create_app(), host="127.0.0.1", port=int(sys.argv[1]), threads=int(sys.argv[2]))
