"""The access log: one JSON line per request, never a secret."""

import json
import logging

import requests

from .factories import make_map
from .helpers import ServeProcess, serve_env


def access_lines(caplog) -> list[dict]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "mapapi.access"]


def test_each_request_is_logged_once_with_its_account_and_request_id(api, account, key, caplog):
    caplog.set_level(logging.INFO, logger="mapapi.access")
    created = make_map(api)
    api.get(f"/maps/{created['id']}", headers={"X-Request-Id": "trace-1"})
    lines = access_lines(caplog)
    assert [(line["method"], line["status"]) for line in lines] == [("POST", 201), ("GET", 200)]
    assert lines[1]["path"] == f"/api/v1/maps/{created['id']}"
    assert lines[1]["request_id"] == "trace-1"
    assert lines[1]["account_id"] == account
    assert lines[1]["client"] == "127.0.0.1"
    assert lines[1]["duration_ms"] >= 0
    assert key not in caplog.text


def test_refused_requests_are_logged_without_the_key_they_sent(client, caplog):
    caplog.set_level(logging.INFO, logger="mapapi.access")
    secret = "mk_live_not-a-real-key-but-still-secret"  # noqa: S105 - a made-up key
    client.get("/api/v1/maps?page=1", headers={"Authorization": f"Bearer {secret}"})
    (line,) = access_lines(caplog)
    assert line["status"] == 401 and line["account_id"] is None
    assert line["path"] == "/api/v1/maps"
    assert secret not in caplog.text


def test_mapapi_serve_writes_the_access_log_after_migrating_sqlite(tmp_path):
    """The migration at start-up must not swallow the service's logging setup."""
    env = serve_env(tmp_path, f"sqlite:///{tmp_path / 'served.sqlite3'}")
    server = ServeProcess(env, tmp_path, "served")
    try:
        server.wait_until_up()
        key = server.stdout().strip()
        response = requests.get(
            server.base + "/api/v1/maps",
            headers={"Authorization": f"Bearer {key}", "X-Request-Id": "served-1"},
            timeout=10,
        )
        assert response.status_code == 200
    finally:
        server.stop()
    stderr = server.stderr_path.read_text()
    access = [line for line in stderr.splitlines() if "mapapi.access" in line]
    api_lines = [line for line in access if '"path": "/api/v1/maps"' in line]
    assert len(api_lines) == 1 and '"request_id": "served-1"' in api_lines[0]
    assert key not in stderr
