"""One pipeline for every request: request id, gzip, metrics and the access
log given once, around the whole app, to whatever answers."""

import ast
import gzip
import json
import logging
from pathlib import Path

import pytest

from mapapi import metrics

from .factories import make_map

PACKAGE = Path(__file__).resolve().parent.parent / "mapapi"
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}
#: The steps that belong to the pipeline alone.
PIPELINE_STEPS = {"access_log", "compression", "request_metrics"}


@pytest.fixture
def gzip_from_1_byte(app_config):
    app_config["GZIP_MIN_BYTES"] = 1


def access_lines(caplog) -> list[dict]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "mapapi.access"]


def tool_call(name: str, **arguments) -> str:
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    )


def answers(client, key, map_id):
    """One request of each kind of answerer: (what it is, its answer, the path logged)."""
    auth = {"Authorization": f"Bearer {key}", "Accept-Encoding": "gzip"}
    listing = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    return [
        ("a view", client.get(f"/api/v1/maps/{map_id}", headers={**auth, "X-Request-Id": "r-1"}), "r-1"),
        ("an unknown path", client.get("/nowhere", headers={**auth, "X-Request-Id": "r-2"}), "r-2"),
        ("a refusal", client.get("/api/v1/maps", headers={"Accept-Encoding": "gzip", "X-Request-Id": "r-3"}), "r-3"),
        ("the /mcp view", client.post("/mcp", data=listing, headers={**MCP_HEADERS, **auth, "X-Request-Id": "r-4"}), "r-4"),
        ("the layer in front of Flask",
         client.post("/mcp", data=tool_call("get_map", mapId=map_id), headers={**MCP_HEADERS, **auth, "X-Request-Id": "r-5"}),
         "r-5"),
    ]  # fmt: skip


def test_every_answerer_gets_the_request_id_gzip_and_one_log_line(gzip_from_1_byte, client, api, key, caplog):
    map_id = make_map(api)["id"]
    caplog.set_level(logging.INFO, logger="mapapi.access")
    caplog.clear()
    for what, answer, request_id in answers(client, key, map_id):
        assert answer.headers["X-Request-Id"] == request_id, what
        assert answer.headers.getlist("X-Request-Id") == [request_id], what
        assert answer.headers["Content-Encoding"] == "gzip", what
        assert "Accept-Encoding" in answer.headers["Vary"], what
        assert int(answer.headers["Content-Length"]) == len(answer.get_data()), what
        json.loads(gzip.decompress(answer.get_data()))
    lines = access_lines(caplog)
    by_id = {}
    for line in lines:
        by_id.setdefault(line["request_id"], []).append((line["method"], line["path"], line["status"]))
    assert by_id["r-1"] == [("GET", f"/api/v1/maps/{map_id}", 200)]
    assert by_id["r-2"] == [("GET", "/nowhere", 404)]
    assert by_id["r-3"] == [("GET", "/api/v1/maps", 401)]
    assert by_id["r-4"] == [("POST", "/mcp", 200)]
    # The tool call's API request is a request of its own, under the same id.
    assert sorted(by_id["r-5"]) == [("GET", f"/api/v1/maps/{map_id}", 200), ("POST", "/mcp", 200)]


def test_every_answerer_is_counted_once_in_the_metrics(client, api, key, monkeypatch):
    map_id = make_map(api)["id"]
    monkeypatch.setattr(metrics, "serving", True)

    def counted(route: str, method: str, status: str) -> float:
        return metrics.REQUESTS.labels(route, method, status)._value.get()

    before = {
        "view": counted("/api/v1/maps/<map_id>", "GET", "200"),
        "unmatched": counted("unmatched", "GET", "404"),
        "mcp": counted("/mcp", "POST", "200"),
    }
    answers(client, key, map_id)
    assert counted("/api/v1/maps/<map_id>", "GET", "200") == before["view"] + 2  # r-1 and r-5's API request
    assert counted("unmatched", "GET", "404") == before["unmatched"] + 1
    assert counted("/mcp", "POST", "200") == before["mcp"] + 2  # the view's and the layer's


def test_a_small_answer_keeps_its_identity_body(client, api):
    map_id = make_map(api)["id"]
    small = api.get(f"/maps/{map_id}", headers={"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in small.headers and small.get_json()["data"]["id"] == map_id


def test_a_head_is_answered_with_the_identity_headers(gzip_from_1_byte, client, api, key):
    map_id = make_map(api)["id"]
    auth = {"Authorization": f"Bearer {key}", "Accept-Encoding": "gzip"}
    full = client.get(f"/api/v1/maps/{map_id}", headers={"Authorization": f"Bearer {key}"})
    head = client.head(f"/api/v1/maps/{map_id}", headers=auth)
    assert head.status_code == 200 and "Content-Encoding" not in head.headers
    assert head.headers["Content-Length"] == full.headers["Content-Length"] and head.get_data() == b""


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            names.update(alias.name for alias in node.names)
            names.add((node.module or "").rsplit(".", 1)[-1])
        elif isinstance(node, ast.Import):
            names.update(alias.name.rsplit(".", 1)[-1] for alias in node.names)
    return names


def test_no_hook_or_layer_repeats_the_pipelines_steps():
    """The app's hooks and /mcp's layer leave the cross-cutting steps to the pipeline."""
    for path in (PACKAGE / "http" / "hooks.py", PACKAGE / "mcp" / "front.py", PACKAGE / "mcp" / "remote.py"):
        assert not _imports(path) & PIPELINE_STEPS, path


def test_the_mcp_modules_import_one_way():
    """``bridge`` and ``remote`` share what they both need from ``caller``, below them."""
    assert "remote" not in _imports(PACKAGE / "mcp" / "bridge.py")
    assert not _imports(PACKAGE / "mcp" / "caller.py") & {"remote", "bridge", "front"}
