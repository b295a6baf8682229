"""`mapapi db backup`: a consistent copy of SQLite while writes go on."""

import sqlite3
import threading

import pytest
import requests

from mapapi import create_app
from mapapi.extensions import db

from .factories import make_map


@pytest.fixture
def sqlite_only(app):
    with app.app_context():
        if db.engine.dialect.name != "sqlite":
            pytest.skip("db backup copies the embedded SQLite database (PostgreSQL: pg_dump)")


def test_backup_taken_while_serving_writes_restores_with_the_data(
    sqlite_only, app, app_config, runner, api, key, live_server, tmp_path
):
    before = make_map(api, title="before the backup")
    stop = threading.Event()
    written, failures = [], []

    def keep_writing():
        headers = {"Authorization": f"Bearer {key}"}
        while not stop.is_set() and len(written) < 500:
            response = requests.post(
                f"{live_server}/api/v1/maps", json={"title": "during"}, headers=headers, timeout=10
            )
            if response.status_code != 201:
                failures.append(response.status_code)
                return
            written.append(response.json()["data"]["id"])

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        while len(written) < 5 and writer.is_alive():
            stop.wait(0.01)
        target = tmp_path / "backup.sqlite3"
        result = runner.invoke(args=["db", "backup", str(target)])
    finally:
        stop.set()
        writer.join(timeout=30)
    assert result.exit_code == 0, result.output
    assert failures == [] and len(written) >= 5

    with sqlite3.connect(target) as copy:
        assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    restored = create_app({**app_config, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{target}"})
    client = restored.test_client()
    headers = {"Authorization": f"Bearer {key}"}
    maps = client.get("/api/v1/maps?pageSize=100", headers=headers).get_json()["data"]
    ids = [m["id"] for m in maps["maps"]]
    assert ids[0] == before["id"]
    assert 5 <= len(ids) - 1 <= len(written)
    assert ids[1:] == written[: len(ids) - 1]  # a prefix of the acknowledged writes
    with restored.app_context():
        db.engine.dispose()


def test_backup_refuses_to_overwrite_a_file(sqlite_only, runner, tmp_path):
    target = tmp_path / "exists.sqlite3"
    target.write_text("keep me")
    result = runner.invoke(args=["db", "backup", str(target)])
    assert result.exit_code == 1
    assert "exists" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert target.read_text() == "keep me"


def test_backup_of_postgresql_points_to_pg_dump(app_config, tmp_path):
    if not app_config["SQLALCHEMY_DATABASE_URI"].startswith("postgresql"):
        pytest.skip("runs in the PostgreSQL run")
    result = create_app(app_config).test_cli_runner().invoke(
        args=["db", "backup", str(tmp_path / "x")]
    )
    assert result.exit_code == 1 and "pg_dump" in result.stderr
