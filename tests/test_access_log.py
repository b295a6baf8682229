"""The access log: one JSON line per request, never a secret."""

import json
import logging

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
