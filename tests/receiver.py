"""A real HTTP receiver of webhooks on 127.0.0.1, for delivery tests.

It records every request (headers and exact body bytes) and answers what
the test scripts: a status per request, in order, then ``default``; it
counts the requests it answers at once, by path.
"""

import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict
    body: bytes
    at: float


class Receiver:
    def __init__(self, default: int = 204):
        self.default = default
        self.script: deque = deque()
        self.received: list[Received] = []
        self.arrived = threading.Condition()
        #: Seconds to hold each request before answering (a slow receiver).
        self.hold = 0.0
        #: Requests being answered now, and the most at once, by path.
        self.answering: Counter[str] = Counter()
        self.most_at_once: Counter[str] = Counter()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                with receiver.arrived:
                    receiver.received.append(
                        Received(self.path, dict(self.headers.items()), body, time.monotonic())
                    )
                    receiver.arrived.notify_all()
                    status = receiver.script.popleft() if receiver.script else receiver.default
                    receiver.answering[self.path] += 1
                    receiver.most_at_once[self.path] = max(
                        receiver.most_at_once[self.path], receiver.answering[self.path]
                    )
                try:
                    if receiver.hold:
                        time.sleep(receiver.hold)
                    self.send_response(status)
                    if 300 <= status < 400:
                        self.send_header("Location", "/elsewhere")
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                finally:
                    with receiver.arrived:
                        receiver.answering[self.path] -= 1

            def log_message(self, *_args):
                pass

        self.handler = Handler
        self._listen(0)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"

    def _listen(self, port: int) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self.handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def go_down(self) -> None:
        """Stop listening: connections are refused until ``come_up``."""
        self.close()

    def come_up(self) -> None:
        self._listen(self.port)

    def wait_for(self, predicate, seconds: float = 20.0) -> bool:
        """Until ``predicate(received)`` holds; whether it did in time."""
        deadline = time.monotonic() + seconds
        with self.arrived:
            while not predicate(self.received):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.arrived.wait(min(left, 0.2))
        return True

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
