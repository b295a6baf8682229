"""What a hostile account points its webhooks at, for the fairness tests.

- ``SilentReceiver``: a real socket on 127.0.0.1 that accepts connections
  and never answers, counting the connections open at once.
- Names under ``HANGING_DOMAIN`` (``.test`` is reserved for testing, RFC
  2606) whose lookup never ends: ``HangingResolver`` stands in for the
  system's resolver in the tests' own process (the worker takes a resolver
  function); in a child process, ``HANGING_DNS`` on its ``PYTHONPATH``
  makes ``socket.getaddrinfo`` hang for them.
"""

import selectors
import socket
import threading
from collections import Counter
from pathlib import Path

HANGING_DOMAIN = ".hang.test"

#: A folder whose ``sitecustomize.py`` makes lookups of those names hang in
#: a child process that has it on its ``PYTHONPATH``.
HANGING_DNS = Path(__file__).parent / "hanging_dns"


def hanging_url(number: int) -> str:
    return f"http://hook-{number}{HANGING_DOMAIN}:9/in"


class HangingResolver:
    """``socket.getaddrinfo``, but lookups of ``HANGING_DOMAIN`` names wait
    until ``release()`` and then fail; ``calls`` counts them by name."""

    def __init__(self):
        self.calls: Counter[str] = Counter()
        self._released = threading.Event()

    def __call__(self, host, port, *args, **kwargs):
        if host.endswith(HANGING_DOMAIN):
            self.calls[host] += 1
            self._released.wait()
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return socket.getaddrinfo(host, port, *args, **kwargs)

    def release(self) -> None:
        self._released.set()


class SilentReceiver:
    """Accepts connections on 127.0.0.1, reads what comes, never answers.

    ``connections`` counts the connections accepted, ``most_at_once`` the
    most open at the same time (a connection is open until its client
    closes it, or ``close()``).
    """

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/in"
        self.connections = 0
        self.most_at_once = 0
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.listener, selectors.EVENT_READ)
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closing.is_set():
            for key, _ in self._selector.select(timeout=0.1):
                if key.fileobj is self.listener:
                    self._accept()
                else:
                    self._read(key.fileobj)

    def _accept(self) -> None:
        try:
            connection, _ = self.listener.accept()
        except BlockingIOError:
            return
        connection.setblocking(False)
        self._selector.register(connection, selectors.EVENT_READ)
        with self._lock:
            self._open.add(connection)
            self.connections += 1
            self.most_at_once = max(self.most_at_once, len(self._open))

    def _read(self, connection: socket.socket) -> None:
        try:
            if connection.recv(65536):
                return  # the request: read, never answered
        except BlockingIOError:
            return
        except OSError:
            pass
        self._forget(connection)  # the client closed it

    def _forget(self, connection: socket.socket) -> None:
        self._selector.unregister(connection)
        connection.close()
        with self._lock:
            self._open.discard(connection)

    @property
    def open_now(self) -> int:
        with self._lock:
            return len(self._open)

    def close(self) -> None:
        """Close every connection (the attempts waiting on them fail) and the listener."""
        self._closing.set()
        self._thread.join(timeout=5)
        for connection in list(self._open):
            self._forget(connection)
        self._selector.close()
        self.listener.close()
