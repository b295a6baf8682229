"""Test and benchmark only: lookups of names under .hang.test never end.

Put this folder on a child process's PYTHONPATH: Python imports
``sitecustomize`` at start, and ``socket.getaddrinfo`` then hangs for those
names, as it would for a name whose nameserver never answers. ``.test`` is
reserved for testing (RFC 2606): no real name is affected.
"""

import socket
import threading

HANGING_DOMAIN = ".hang.test"
_system_getaddrinfo = socket.getaddrinfo
_never = threading.Event()


def getaddrinfo(host, *args, **kwargs):
    if isinstance(host, str) and host.endswith(HANGING_DOMAIN):
        _never.wait()
    return _system_getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = getaddrinfo
