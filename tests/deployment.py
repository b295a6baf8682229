"""`mapapi` commands, servers and workers as real processes on a database
of their own, for tests of delivery across processes."""

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import requests
from sqlalchemy import create_engine, text

from mapapi import create_app
from mapapi.extensions import db

from . import backends
from .factories import create_account, create_key
from .helpers import ServeProcess, mapapi_program

API = "/api/v1"
#: Quick enough for a test: retries and leases in fractions of a second.
WORKER_CONFIG = """
WEBHOOKS_POLL_SECONDS = 0.05
WEBHOOKS_LEASE_SECONDS = 2
WEBHOOKS_RETRY_SCHEDULE = (0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2)
"""


class Deployment:
    """One database, the environment of `mapapi` commands on it, and a key."""

    def __init__(self, database_url: str, tmp_path: Path, config: str = WORKER_CONFIG):
        self.database_url = database_url
        self.tmp_path = tmp_path
        instance = tmp_path / "instance"
        instance.mkdir()
        (instance / "config.py").write_text(config)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MAPAPI_")}
        self.env.update(
            MAPAPI_DATABASE_URL=database_url,
            MAPAPI_INSTANCE_PATH=str(instance),
            MAPAPI_BOOTSTRAP="0",
            MAPAPI_WEBHOOKS_ALLOW_PRIVATE="1",
            MAPAPI_RATELIMIT_GENERAL="1000000 per hour",
        )
        self.processes: list[subprocess.Popen] = []
        self.servers: list[ServeProcess] = []
        self.command("db", "upgrade")
        self.command("accounts", "create", "hooks@example.com")
        self.key = self.command("keys", "create", "hooks@example.com", "--name", "t").strip()

    def command(self, *args) -> str:
        result = subprocess.run(
            [mapapi_program(), *args], cwd=self.tmp_path, env=self.env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, (args, result.stderr)
        return result.stdout

    def worker(self, name: str, **env) -> subprocess.Popen:
        with open(self.tmp_path / f"{name}.err", "wb") as err:
            process = subprocess.Popen(
                [mapapi_program(), "worker"], cwd=self.tmp_path, env={**self.env, **env},
                stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        self.processes.append(process)
        return process

    def serve(self, name: str, **env) -> ServeProcess:
        server = ServeProcess({**self.env, **env}, self.tmp_path, name, threads=8)
        self.servers.append(server)
        server.wait_until_up(20)
        return server

    def add_account(self, email: str) -> str:
        """Another account, made in this process on the same database; its key."""
        app = create_app({"SQLALCHEMY_DATABASE_URI": self.database_url})
        try:
            create_account(app, email)
            return create_key(app, email)
        finally:
            with app.app_context():
                db.engine.dispose()

    def call(self, server: ServeProcess, method: str, path: str, status: int, key=None, **kwargs):
        """A request as ``key``'s account (the first one's by default); its ``data``."""
        response = requests.request(
            method, server.base + API + path, timeout=30,
            headers={"Authorization": f"Bearer {key or self.key}"}, **kwargs,
        )  # fmt: skip
        assert response.status_code == status, response.text
        return response.json()["data"]

    def rows(self, sql: str) -> list:
        engine = create_engine(self.database_url)
        try:
            with engine.connect() as connection:
                return connection.execute(text(sql)).all()
        finally:
            engine.dispose()

    def close(self) -> None:
        running = [process for process in self.processes if process.poll() is None]
        for process in running:  # all at once: each lets its attempts in flight finish
            process.terminate()
        for process in running:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for server in self.servers:
            server.stop()


@contextmanager
def new_database(tmp_path: Path, *, postgres: bool | None = None):
    """The URL of a new database: on the suite's backend, or PostgreSQL when
    ``postgres``; a PostgreSQL one is dropped after."""
    if not (backends.on_postgres() if postgres is None else postgres):
        yield f"sqlite:///{tmp_path / 'hooks.sqlite3'}"
        return
    url = backends.create_postgres_database()
    try:
        yield url
    finally:
        backends.drop_postgres_database(url)


@contextmanager
def deployed(database_url: str, tmp_path: Path, config: str = WORKER_CONFIG):
    deployment = Deployment(database_url, tmp_path, config)
    try:
        yield deployment
    finally:
        deployment.close()
