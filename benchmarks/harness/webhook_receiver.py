"""A webhook receiver on 127.0.0.1, in threads of the benchmark's own process.

It answers 204 to every POST and counts, once per ``webhook-id``, the
deliveries that a receiver would accept: the Standard Webhooks signature
verifies with the ``standardwebhooks`` package (as the README tells
receivers to check it) and the body is the event the headers name.
Duplicates (at-least-once delivery) and refused deliveries are counted
apart.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Several delivery threads connect at once; the default backlog is 5.
    request_queue_size = 128

    def handle_error(self, request, client_address):
        """A sender may close as soon as it has read the status line."""


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.receiver.receive(body, dict(self.headers.items()))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_args):
        pass


class Receiver:
    def __init__(self):
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.receiver = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.expect(None)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def expect(self, secret: str | None) -> None:
        """From now on, verify with ``secret`` (an endpoint's), counting afresh."""
        with self._lock:
            self._verifier = Webhook(secret) if secret else None
            #: webhook-id -> time.monotonic() of its first arrival
            self.arrivals: dict[str, float] = {}
            self.duplicates = 0
            self.refused = 0

    def receive(self, body: bytes, headers: dict[str, str]) -> None:
        event_id = {name.lower(): value for name, value in headers.items()}.get("webhook-id")
        accepted = self._verifier is not None and self._is_signed_event(body, headers, event_id)
        with self._lock:
            if not accepted:
                self.refused += 1
            elif event_id in self.arrivals:
                self.duplicates += 1
            else:
                self.arrivals[event_id] = time.monotonic()

    def _is_signed_event(self, body: bytes, headers: dict[str, str], event_id) -> bool:
        try:
            self._verifier.verify(body, headers)
            return json.loads(body)["id"] == event_id
        except (WebhookVerificationError, ValueError, KeyError, TypeError):
            return False

    def received(self) -> int:
        with self._lock:
            return len(self.arrivals)
