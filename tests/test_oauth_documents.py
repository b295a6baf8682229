"""Client ID Metadata Documents fetched over real TLS from a server of the test."""

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from .oauth_flow import REDIRECT, approve, authorize_url, code_of, exchange, pkce
from .tls import serve_over_tls


class Documents(BaseHTTPRequestHandler):
    """``/client.json`` a good document; the other paths, each a way to be refused."""

    base = ""

    def do_GET(self):  # noqa: N802 - the standard library's name
        good = {"client_id": self.base + "/client.json", "client_name": "Doc <b>client</b>", "redirect_uris": [REDIRECT]}
        answers = {
            "/client.json": (200, json.dumps(good).encode()),
            "/other.json": (200, json.dumps({**good, "client_id": self.base + "/elsewhere"}).encode()),
            "/moved.json": (302, b""),
            "/huge.json": (200, b" " * (65 * 1024) + json.dumps(good).encode()),
        }
        status, body = answers.get(self.path, (404, b""))
        self.send_response(status)
        if status == 302:
            self.send_header("Location", "/client.json")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def documents(app, tmp_path):
    """An https server on localhost whose certificate the app trusts; its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Documents)
    cert = serve_over_tls(server, tmp_path)
    Documents.base = f"https://localhost:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    app.config["WEBHOOKS_ALLOW_PRIVATE"] = True  # the server is on loopback
    app.extensions["mapapi.oauth.tls"] = ssl.create_default_context(cafile=str(cert))
    yield Documents.base
    server.shutdown()
    thread.join(timeout=5)


def test_a_client_known_by_its_document_is_approved_and_gets_tokens(documents, client, key):
    client_id = documents + "/client.json"
    verifier, challenge = pkce()
    page = client.get(authorize_url(client_id, challenge))
    assert page.status_code == 200 and "Doc &lt;b&gt;client&lt;/b&gt;" in page.get_data(as_text=True)
    code = code_of(approve(client, authorize_url(client_id, challenge), key))
    answer = exchange(client, client_id, code, verifier)
    assert answer.status_code == 200 and answer.get_json()["scope"] == "mapapi:read mapapi:write"


@pytest.mark.parametrize(
    ("path", "says"),
    [("/other.json", "does not name"), ("/moved.json", "redirects"), ("/huge.json", "64 KiB"), ("/none.json", "200")],
)
def test_a_document_that_does_not_fit_is_shown_on_the_page(documents, client, path, says):
    page = client.get(authorize_url(documents + path, pkce()[1]))
    assert page.status_code == 400 and "Location" not in page.headers
    assert says in page.get_data(as_text=True)


def test_a_document_on_loopback_is_refused_without_allow_private(documents, app, client):
    app.config["WEBHOOKS_ALLOW_PRIVATE"] = False
    page = client.get(authorize_url(documents + "/client.json", pkce()[1]))
    assert page.status_code == 400 and "loopback" in page.get_data(as_text=True)
