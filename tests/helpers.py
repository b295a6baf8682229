"""Checks of the contract's envelopes, a free local port, and ``mapapi serve``
in a subprocess."""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from . import backends
from .factories import error_code

ERROR_KEYS = {"code", "message", "details"}


def data_of(response, status=200):
    """The payload of a success envelope, asserting the status and the shape."""
    body = response.get_json()
    assert response.status_code == status, body
    assert set(body) == {"data"}, body
    return body["data"]


def field_errors(response) -> dict:
    """The ``details`` of a VALIDATION_ERROR, each a non-empty list of messages."""
    assert response.status_code == 400, response.get_json()
    assert error_code(response) == "VALIDATION_ERROR"
    details = response.get_json()["error"]["details"]
    for messages in details.values():
        assert isinstance(messages, list) and messages, details
        assert all(isinstance(message, str) and message for message in messages), details
    return details


def outcome(response):
    """``(status, code, sorted detail fields)`` of an error, to compare many at once."""
    body = response.get_json()
    error = body.get("error") if set(body) == {"error"} else None
    if not isinstance(error, dict) or not {"code", "message"} <= set(error) <= ERROR_KEYS:
        return response.status_code, body
    details = error.get("details", {})
    for messages in details.values():
        if not isinstance(messages, list) or not messages:
            return response.status_code, body
        if not all(isinstance(message, str) and message for message in messages):
            return response.status_code, body
    return response.status_code, error["code"], sorted(details)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


LOCATION_FIELDS = {
    "id", "mapId", "name", "lat", "lng", "description", "address", "categoryId",
    "tagIds", "properties", "externalId", "layers", "createdAt", "updatedAt",
}
LAYER_FIELDS = {
    "id", "mapId", "name", "color", "order", "routeEnabled", "routeShowByDefault",
    "createdAt", "updatedAt",
}
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
TICK = 0.005  # longer than a millisecond, so timestamps of two writes differ


def validation_details(response) -> dict:
    """The ``details`` of a 400 VALIDATION_ERROR ``response``."""
    assert response.status_code == 400, response.get_json()
    assert error_code(response) == "VALIDATION_ERROR"
    body = response.get_json()["error"]
    assert isinstance(body["message"], str) and body["message"]
    assert "details" in body, body
    return body["details"]


def mapapi_program() -> str:
    """The installed console script, next to this interpreter or on PATH."""
    beside = Path(sys.executable).parent / "mapapi"
    if beside.exists():
        return str(beside)
    found = shutil.which("mapapi")
    if found is None:
        pytest.skip("the mapapi console script is not installed")
    return found


def run_mapapi(env: dict, cwd: Path, *args) -> subprocess.CompletedProcess:
    """A ``mapapi`` command run to its end, its output captured as text."""
    return subprocess.run(
        [mapapi_program(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def checked(result: subprocess.CompletedProcess) -> str:
    """The standard output of a command that must have succeeded."""
    assert result.returncode == 0, (result.args, result.returncode, result.stderr)
    return result.stdout


class ServeProcess:
    """``mapapi serve`` in a subprocess on a free port; its output in files of ``workdir``.

    ``options`` are more of the command's options, such as ``("--send-timeout", "5")``.
    """

    def __init__(self, env: dict, workdir: Path, name: str, threads: int | None = None, options=()):
        self.name = name
        self.env = env  # what other commands on the same database need
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.stdout_path = workdir / f"{name}.out"
        self.stderr_path = workdir / f"{name}.err"
        command = [mapapi_program(), "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        if threads is not None:
            command += ["--threads", str(threads)]
        command += list(options)
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(command, cwd=workdir, env=env, stdout=out, stderr=err)

    def wait_until_up(self, seconds: float = 20.0) -> None:
        """Until ``/healthz`` answers as the contract says; fails if the process exits."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                response = requests.get(self.base + "/healthz", timeout=1)
                if response.status_code == 200:
                    assert response.json() == {"data": {"status": "ok"}}
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise AssertionError(
            f"server {self.name} did not come up (exit {self.process.poll()}): {self.stderr()}"
        )

    def stdout(self) -> str:
        return self.stdout_path.read_text()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        """Teardown: SIGTERM, then SIGKILL if it is still there after 5 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def serve_env(workdir: Path, database_url: str, **variables) -> dict:
    """The environment of a ``mapapi`` command: no MAPAPI_* but these."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("MAPAPI_")}
    env.update(
        MAPAPI_DATABASE_URL=database_url,
        MAPAPI_INSTANCE_PATH=str(workdir / "instance"),
        MAPAPI_BOOTSTRAP="1",
    )
    env.update(variables)
    return env


@contextmanager
def served_mapapi(workdir: Path, options=(), **variables):
    """``mapapi serve`` with its default settings (but ``options`` and
    ``MAPAPI_*`` ``variables``) on the suite's backend, up and answering:
    ``(process, the first-run key)``; stopped and its database dropped after.
    """
    database_url = f"sqlite:///{workdir / 'served.sqlite3'}"
    if backends.on_postgres():
        database_url = backends.create_postgres_database()
        variables.setdefault("MAPAPI_RATELIMIT_STORAGE_URI", backends.REDIS_URL)
        (workdir / "instance").mkdir(exist_ok=True)
        # Buckets of this server only, in the suite's Redis.
        (workdir / "instance" / "config.py").write_text(
            f"RATELIMIT_KEY_PREFIX = {backends.unique_prefix()!r}\n"
        )
    server = ServeProcess(
        serve_env(workdir, database_url, **variables), workdir, "serve", options=options
    )
    try:
        server.wait_until_up()
        key = server.stdout().strip().splitlines()[-1]
        yield server, key
    finally:
        server.stop()
        if backends.on_postgres():
            backends.drop_postgres_database(database_url)


def wait_until(predicate, seconds: float = 60.0, interval: float = 0.1) -> bool:
    """Whether ``predicate()`` became true within ``seconds``, asked every ``interval``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


@contextmanager
def headless_chromium(*flags: str):
    """Debian's chromium, headless, driven by Playwright (which downloads no
    browser of its own); skips the test when chromium is not installed."""
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu", *flags]
        )
        try:
            yield browser
        finally:
            browser.close()
