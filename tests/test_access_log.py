"""The access log: one JSON line per request, never a secret."""

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from .factories import make_map


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
    mapapi = Path(sys.executable).with_name("mapapi")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "MAPAPI_DATABASE_URL": f"sqlite:///{tmp_path / 'served.sqlite3'}"}
    server = subprocess.Popen(
        [str(mapapi), "serve", "--port", str(port)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        key = server.stdout.readline().strip()
        deadline = time.monotonic() + 15
        while True:
            try:
                response = requests.get(
                    f"http://127.0.0.1:{port}/api/v1/maps",
                    headers={"Authorization": f"Bearer {key}", "X-Request-Id": "served-1"},
                    timeout=2,
                )
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        assert response.status_code == 200
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=20)
    access = [line for line in stderr.splitlines() if "mapapi.access" in line]
    assert len(access) == 1 and '"request_id": "served-1"' in access[0]
    assert key not in stderr
