"""A webhook receiver on 127.0.0.1, in threads of the benchmark's own process.

It answers 204 to every POST and counts, once per path and ``webhook-id``
(one endpoint's URL and one event), the deliveries that a receiver would
accept: the Standard Webhooks signature verifies with the
``standardwebhooks`` package (as the README tells receivers to check it),
with the secret of the endpoint whose path it came to, and the body is the
event the headers name. Duplicates (at-least-once delivery) and refused
deliveries are counted apart.
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
        self.server.receiver.receive(self.path, body, dict(self.headers.items()))
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
        self.expect({})

    @property
    def url(self) -> str:
        return self.url_for("/hook")

    def url_for(self, path: str) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def expect(self, secrets: dict[str, str]) -> None:
        """From now on, verify what comes to each path with its endpoint's
        secret (``{path: secret}``), counting afresh."""
        with self._lock:
            self._verifiers = {path: Webhook(secret) for path, secret in secrets.items()}
            #: (path, webhook-id) -> time.monotonic() of its first arrival
            self.arrivals: dict[tuple[str, str], float] = {}
            self.duplicates = 0
            self.refused = 0

    def receive(self, path: str, body: bytes, headers: dict[str, str]) -> None:
        event_id = {name.lower(): value for name, value in headers.items()}.get("webhook-id")
        verifier = self._verifiers.get(path)
        accepted = verifier is not None and _is_signed_event(verifier, body, headers, event_id)
        with self._lock:
            if not accepted:
                self.refused += 1
            elif (path, event_id) in self.arrivals:
                self.duplicates += 1
            else:
                self.arrivals[path, event_id] = time.monotonic()

    def received(self) -> int:
        with self._lock:
            return len(self.arrivals)


def _is_signed_event(verifier: Webhook, body: bytes, headers: dict[str, str], event_id) -> bool:
    try:
        verifier.verify(body, headers)
        return json.loads(body)["id"] == event_id
    except (WebhookVerificationError, ValueError, KeyError, TypeError):
        return False
