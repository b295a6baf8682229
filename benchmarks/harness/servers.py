"""The processes under load: ``mapapi serve``, the bare view and the references."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .event_count import EventCounter
from .settings import HERE, RAISED_LIMIT, SERVER_THREADS


class Processes:
    """Every process the benchmark starts, stopped together on the way out."""

    def __init__(self):
        self.running: list[subprocess.Popen] = []

    def start(self, command: list[str], env: dict, log_path: Path) -> subprocess.Popen:
        log_file = open(log_path, "wb")
        # A session of its own: Ctrl-C reaches only us, and we stop it in order.
        process = subprocess.Popen(
            command,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log_file.close()
        self.running.append(process)
        return process

    def stop_all(self) -> None:
        for process in reversed(self.running):
            stop_process(process)
        self.running.clear()


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


#: Straight to 127.0.0.1, whatever http_proxy says.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def wait_until_serving(process: subprocess.Popen, url: str, log_path: Path, timeout=60.0):
    """Poll ``url`` until the server answers it; fail with the server's log if it died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited ({process.returncode}):\n{tail(log_path)}")
        try:
            with DIRECT.open(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # an answer, even a refusal, means it is serving
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise SystemExit(f"the server did not answer {url} within {timeout:.0f} s:\n{tail(log_path)}")


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def mapapi_command() -> list[str]:
    """``mapapi`` from this interpreter's environment (the console script, if installed)."""
    script = Path(sys.executable).with_name("mapapi")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from mapapi.console import main; main()"]


def server_environment(database_url: str, instance_path: Path) -> dict:
    return {
        **os.environ,
        "MAPAPI_DATABASE_URL": database_url,
        "MAPAPI_BOOTSTRAP": "0",
        "MAPAPI_RATELIMIT_GENERAL": RAISED_LIMIT,
        "MAPAPI_RATELIMIT_MAP_CREATE": RAISED_LIMIT,
        "MAPAPI_RATELIMIT_BULK": RAISED_LIMIT,
        "MAPAPI_RATELIMIT_SYNC": RAISED_LIMIT,
        "MAPAPI_INSTANCE_PATH": str(instance_path),
    }


def start_app_server(
    processes: Processes,
    database_url: str,
    workdir: Path,
    name: str,
    *,
    mapapi: list[str] | None = None,
    settings=None,
):
    """``mapapi serve``: this environment's, or the command ``mapapi`` names
    (another version); ``settings``: more ``MAPAPI_*`` variables for it."""
    port = free_port()
    log_path = workdir / f"server-{name}.log"
    command = (mapapi or mapapi_command()) + [
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--threads",
        str(SERVER_THREADS),
    ]
    environment = {**server_environment(database_url, workdir), **(settings or {})}
    process = processes.start(command, environment, log_path)
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(process, base + "/healthz", log_path)
    return Server(name, base, process, log_path)


REFERENCES = HERE / "references"


def start_bare_server(processes: Processes, workdir: Path):
    return start_reference(processes, "bare", [str(SERVER_THREADS)], workdir, "/")


def stop_server(processes: Processes, server: Server) -> None:
    stop_process(server.process)
    processes.running.remove(server.process)


def start_floor_server(processes: Processes, database_url: str, workdir: Path, backend: str):
    return start_reference(
        processes, "floor", [str(SERVER_THREADS), database_url], workdir, "/", backend,
        server_environment(database_url, workdir),
    )


def start_twin_server(
    processes: Processes, name: str, database_url: str, workdir: Path, backend: str
):
    """mapapi's own app served another way (``references/<name>.py``), on mapapi's settings."""
    return start_reference(
        processes, name, [str(SERVER_THREADS)], workdir, "/healthz", backend,
        server_environment(database_url, workdir),
    )


def start_peer_server(processes: Processes, database_url: str, workdir: Path, backend: str):
    return start_reference(processes, "peer", [database_url], workdir, "/docs", backend)


def start_reference(processes, name, arguments, workdir, probe, backend="", environment=None):
    """``references/<name>.py PORT ...`` in its own process, once it answers ``probe``."""
    port = free_port()
    label = f"{name}-{backend}" if backend else name
    log_path = workdir / f"server-{label}.log"
    command = [sys.executable, str(REFERENCES / f"{name}.py"), str(port), *arguments]
    process = processes.start(command, environment or {**os.environ}, log_path)
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(process, base + probe, log_path)
    return Server(name, base, process, log_path)


@dataclass
class Server:
    name: str
    base_url: str
    process: subprocess.Popen
    log_path: Path
    #: Counts the events mapapi records, for the figures of writes.
    events: EventCounter | None = None


