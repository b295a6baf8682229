"""How ``mapapi serve`` and ``mapapi worker`` start and stop, in real processes.

The log starts with the database (password hidden), the rate-limit storage
and the address, then one line for the schema (Alembic's own lines
silenced); ``worker`` never creates or migrates the schema; an idle process
exits promptly on SIGTERM (the 1 s target is measured by
benchmarks/commands.py; the bound here leaves a busy machine room);
``MAPAPI_HOST`` and ``MAPAPI_PORT`` give ``serve`` its address.
"""

import signal
import sqlite3
import subprocess
import time

import pytest
import requests
from alembic.script import ScriptDirectory

from mapapi.storage.upgrade import MIGRATIONS

from . import backends
from .helpers import ServeProcess, free_port, mapapi_program, run_mapapi, serve_env, wait_until
from .test_settings import clean_env, refused_line, run

#: What "promptly" means here: a few times the benchmark's target.
EXIT_SECONDS = 2.5
HEAD = ScriptDirectory(MIGRATIONS).get_current_head()
PREVIOUS = ScriptDirectory(MIGRATIONS).get_revision(HEAD).down_revision


@pytest.fixture
def database_url(tmp_path):
    """An empty database on the suite's backend (a SQLite file not made yet)."""
    if backends.on_postgres():
        url = backends.create_postgres_database()
        yield url
        backends.drop_postgres_database(url)
    else:
        yield f"sqlite:///{tmp_path / 'db.sqlite3'}"


def log_lines(server: ServeProcess) -> list[str]:
    return [line.split(" ", 3)[3] for line in server.stderr().splitlines()]


def started_serve(tmp_path, env, name) -> ServeProcess:
    server = ServeProcess(env, tmp_path, name)
    server.wait_until_up()
    assert wait_until(lambda: len(log_lines(server)) >= 3, 10), server.stderr()
    return server


def test_serve_s_log_starts_with_database_storage_address_then_the_schema(tmp_path, database_url):
    env = serve_env(tmp_path, database_url, MAPAPI_BOOTSTRAP="0")
    first = started_serve(tmp_path, env, "first")
    first.stop()
    lines = log_lines(first)
    assert lines[0].startswith("mapapi.serve: mapapi ") and "database " in lines[0], lines
    assert "rate-limit storage " in lines[0], lines
    assert lines[1] == f"mapapi.serve: Serving on http://127.0.0.1:{first.port}", lines
    count = len(list(ScriptDirectory(MIGRATIONS).walk_revisions()))
    assert lines[2] == (
        f"mapapi.serve: database schema created: {count} migrations applied (revision {HEAD})"
    ), lines
    assert not [line for line in lines if "alembic" in line], lines

    again = started_serve(tmp_path, env, "again")
    again.stop()
    assert log_lines(again)[2] == f"mapapi.serve: database schema up to date (revision {HEAD})"


def test_serve_upgrades_the_embedded_database_in_one_line(tmp_path):
    env = serve_env(tmp_path, f"sqlite:///{tmp_path / 'old.sqlite3'}", MAPAPI_BOOTSTRAP="0")
    assert run_mapapi(env, tmp_path, "db", "upgrade", PREVIOUS).returncode == 0
    server = started_serve(tmp_path, env, "upgrading")
    server.stop()
    assert log_lines(server)[2] == (
        f"mapapi.serve: database schema upgraded: 1 migrations applied (revision {PREVIOUS} to {HEAD})"
    ), server.stderr()


def revision(url: str) -> str | None:
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table("alembic_version"):
                return None
            return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        engine.dispose()


def test_worker_on_an_empty_database_names_the_command_that_creates_the_schema(
    tmp_path, database_url
):
    if database_url.startswith("sqlite"):
        sqlite3.connect(database_url.removeprefix("sqlite:///")).close()  # there, and empty
    line = refused_line(run(tmp_path, serve_env(tmp_path, database_url), "worker"), status=1)
    assert "has no schema" in line and "mapapi db upgrade" in line, line
    assert revision(database_url) is None


def test_worker_never_upgrades_a_schema_that_is_behind(tmp_path, database_url):
    env = serve_env(tmp_path, database_url)
    assert run_mapapi(env, tmp_path, "db", "upgrade", PREVIOUS).returncode == 0
    line = refused_line(run(tmp_path, env, "worker"), status=1)
    assert "out of date" in line and "mapapi db upgrade" in line, line
    assert revision(database_url) == PREVIOUS


def stops_promptly(process: subprocess.Popen) -> float:
    """Seconds from SIGTERM to the process's exit, which must be status 0."""
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    return time.monotonic() - sent


def test_an_idle_serve_exits_promptly_on_sigterm(tmp_path, database_url):
    server = started_serve(tmp_path, serve_env(tmp_path, database_url), "idle")
    requests.get(server.base + "/healthz", timeout=5)  # a kept-alive connection, read and idle
    assert stops_promptly(server.process) < EXIT_SECONDS
    assert log_lines(server)[-1] == "mapapi.server: stopped"


def test_an_idle_worker_exits_promptly_on_sigterm(tmp_path, database_url):
    env = serve_env(tmp_path, database_url)
    assert run_mapapi(env, tmp_path, "db", "upgrade").returncode == 0
    log = tmp_path / "worker.err"
    with open(log, "wb") as err:
        worker = subprocess.Popen([mapapi_program(), "worker"], cwd=tmp_path, env=env, stderr=err)
    assert wait_until(lambda: "Delivering webhooks" in log.read_text(), 30), log.read_text()
    assert stops_promptly(worker) < EXIT_SECONDS
    assert log.read_text().rstrip().endswith("mapapi.worker: stopped")


def test_mapapi_host_and_port_give_serve_its_address_and_options_win(tmp_path):
    port = free_port()
    env = clean_env(tmp_path, MAPAPI_HOST="127.0.0.1", MAPAPI_PORT=str(port), MAPAPI_BOOTSTRAP="0")
    process = subprocess.Popen(
        [mapapi_program(), "serve"], cwd=tmp_path, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert wait_until(lambda: _answers(port), 30)
    finally:
        process.terminate()
        process.wait(timeout=30)
    server = ServeProcess(env, tmp_path, "option")  # --port given: it wins
    try:
        server.wait_until_up()
        assert server.port != port and not _answers(port)
    finally:
        server.stop()
    refusals = [
        ("MAPAPI_PORT", "http"),
        ("MAPAPI_PORT", "70000"),
        ("MAPAPI_HOST", "nowhere.invalid"),
    ]
    for name, value in refusals:
        line = refused_line(run(tmp_path, clean_env(tmp_path, **{name: value}), "serve"))
        assert name in line and value in line, line


def _answers(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except requests.RequestException:
        return False
