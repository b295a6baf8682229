"""CORS in a real browser: a page from another origin creates a map with
``fetch`` and reads the rate-limit headers (Playwright driving Debian's chromium)."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("playwright.sync_api")

from .helpers import headless_chromium  # noqa: E402

PAGE = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>front-end</title></head>
<body><p>A front-end on another origin.</p></body></html>
"""

CREATE_A_MAP = """async ([api, key]) => {
    const created = await fetch(api + "/maps", {
        method: "POST",
        headers: {"Authorization": "Bearer " + key, "Content-Type": "application/json"},
        body: JSON.stringify({title: "From the browser"}),
    });
    const body = await created.json();
    return {
        status: created.status,
        title: body.data.title,
        remaining: created.headers.get("X-RateLimit-Remaining"),
        limit: created.headers.get("X-RateLimit-Limit"),
        requestId: created.headers.get("X-Request-Id"),
    };
}"""

WITHOUT_A_KEY = """async (api) => {
    const refused = await fetch(api + "/maps");
    return {status: refused.status, code: (await refused.json()).error.code,
            remaining: refused.headers.get("X-RateLimit-Remaining")};
}"""


class Page(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the name http.server calls
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *_args):
        pass


@pytest.fixture
def page_origin():
    """A plain HTTP server on another port: another origin than the API's."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(timeout=5)


@pytest.fixture
def app_config(app_config, page_origin):
    app_config["CORS_ORIGINS"] = page_origin
    return app_config


@pytest.fixture
def chromium():
    with headless_chromium() as browser:
        yield browser


def test_a_page_from_another_origin_creates_a_map_and_reads_the_rate_limit(
    chromium, page_origin, live_server, key, api
):
    page = chromium.new_page()
    problems = []
    page.on("console", lambda message: message.type == "error" and problems.append(message.text))
    page.goto(page_origin + "/")

    result = page.evaluate(CREATE_A_MAP, [live_server + "/api/v1", key])
    assert result["status"] == 201 and result["title"] == "From the browser"
    assert result["remaining"] is not None and int(result["remaining"]) < int(result["limit"])
    assert result["requestId"]
    (made,) = api.get("/maps").get_json()["data"]["maps"]
    assert made["title"] == "From the browser"

    refused = page.evaluate(WITHOUT_A_KEY, live_server + "/api/v1")
    assert refused["status"] == 401 and refused["code"] == "MISSING_API_KEY"
    assert refused["remaining"] is not None
    # The 401 is logged as a failed load; nothing may be blocked by CORS.
    assert not [problem for problem in problems if "CORS" in problem], problems


def test_a_page_from_an_origin_not_listed_cannot_read_the_answer(chromium, live_server, key):
    page = chromium.new_page()
    page.set_content("<p>an origin nobody listed</p>")  # about:blank: an opaque origin
    outcome = page.evaluate(
        """async ([api, key]) => {
            try {
                await fetch(api + "/maps", {headers: {"Authorization": "Bearer " + key}});
                return "read";
            } catch (error) {
                return "blocked";
            }
        }""",
        [live_server + "/api/v1", key],
    )
    assert outcome == "blocked"
