#!/usr/bin/env python3
"""How fast the ``mapapi`` commands start and how fast its processes stop,
against an earlier commit, in one run.

``python benchmarks/commands.py [--baseline REV] [--current REV] [--runs N]`` (issue 32):

1. extracts the mapapi of git revision REV (default: the last commit before
   issue 32) and the current one (``--current``, default ``HEAD``: commit
   what you measure) with ``git archive``, and runs each from its own
   source in this interpreter's environment (``PYTHONPATH``): the same
   interpreter, the same installed packages, only mapapi's code differs.
   With ``--venvs``, each is instead installed in a venv of its own with
   its dependencies only, as an operator installs it (as ``run.py
   --baseline`` builds its baseline);
2. gives each version a SQLite database made by its own ``mapapi db
   upgrade``, and accounts by its own ``mapapi accounts create``;
3. runs each command once per version to warm up (bytecode compiled), then
   ``--runs`` rounds, the versions in turn (the order reversed each
   round), each command once a round: ``python -c pass`` (the version's
   interpreter and environment), ``mapapi --version``, ``mapapi --help``
   and ``mapapi keys create`` (a new key each time, ten per account);
4. starts each version's ``mapapi serve`` and ``mapapi worker``, idle, and
   times SIGTERM to exit, ``--stops`` times each, in turn.

Figures are medians; ratios are taken round by round (two commands a few
hundred milliseconds apart see nearly the same machine), then their median.
Wall time is what a script calling the command waits; the CPU time (user +
system, of the process) moves less with other load. Exit status 1 when a
target is not met.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from harness.baseline import Version, build_baseline, extract_revision, run_mapapi
from harness.servers import free_port
from harness.settings import progress

#: The last commit before issue 32 (settings check, metrics, fast commands).
BEFORE = "7b05601"
COMMANDS = {
    "python -c pass": None,
    "mapapi --version": ["--version"],
    "mapapi --help": ["--help"],
    "mapapi keys create": ["keys", "create"],
}
KEYS_PER_ACCOUNT = 10
#: How a version's ``mapapi`` runs from its source, as its console script does.
CONSOLE = "import sys; from mapapi.console import main; sys.exit(main())"
TARGETS = [
    # (what, command, compared with, at most)
    ("`mapapi --version` vs `python -c pass`", "mapapi --version", "python -c pass", 5.0),
    ("`mapapi --help` vs `python -c pass`", "mapapi --help", "python -c pass", 5.0),
    ("`mapapi keys create` vs the baseline's", "mapapi keys create", "baseline", 0.6),
]
STOP_TARGET_SECONDS = 1.0


@dataclass
class Timed:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


@dataclass
class Side:
    version: Version
    python: str
    folder: Path
    environment: dict
    keys_made: int = 0
    times: dict[str, Timed] = field(default_factory=dict)
    stops: dict[str, list[float]] = field(default_factory=dict)


def parse_options(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--baseline", default=BEFORE, help=f"git revision to compare with ({BEFORE})"
    )
    parser.add_argument("--current", default="HEAD", help="git revision measured (HEAD)")
    parser.add_argument("--runs", type=int, default=15, help="rounds of the commands (15)")
    parser.add_argument("--stops", type=int, default=5, help="SIGTERMs per process and version (5)")
    parser.add_argument(
        "--venvs",
        action="store_true",
        help="install each version in a venv of its own, with its dependencies only",
    )
    return parser.parse_args(argv)


def from_source(revision: str, workdir: Path, name: str) -> tuple[Version, dict]:
    """The version of ``revision`` run from its extracted source by this
    interpreter; the environment variables that make it import that source."""
    source = workdir / name / "source"
    commit = extract_revision(revision, source)
    progress(f"{name}: {revision} ({commit[:12]}) from its source, in this environment")
    extra = {"PYTHONPATH": str(source)}
    where = subprocess.run(
        [sys.executable, "-c", "import mapapi; print(mapapi.__file__)"],
        env={**os.environ, **extra}, cwd=source.parent, capture_output=True, text=True,
        check=True,
    ).stdout.strip()  # fmt: skip
    if not Path(where).resolve().is_relative_to(source.resolve()):
        raise SystemExit(f"{name}: this interpreter imports mapapi from {where}, not {source}")
    return Version(name, [sys.executable, "-c", CONSOLE], f"{revision} (commit {commit})"), extra


def prepare(version: Version, python: str, extra: dict, workdir: Path, runs: int) -> Side:
    """The version's own database, made by its own commands, with enough accounts."""
    folder = workdir / f"{version.name}-instance"
    folder.mkdir()
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("MAPAPI_")
    }
    environment.update(extra)
    environment.update(
        MAPAPI_DATABASE_URL=f"sqlite:///{folder / 'mapapi.sqlite3'}",
        MAPAPI_INSTANCE_PATH=str(folder),
        MAPAPI_BOOTSTRAP="0",
    )
    side = Side(version, python, folder, environment)
    progress(f"{version.name}: schema and accounts through its own mapapi")
    run_mapapi(version, ["db", "upgrade"], environment, folder)
    for number in range((runs + 1) // KEYS_PER_ACCOUNT + 1):  # the warm-up's key too
        run_mapapi(version, ["accounts", "create", account(number)], environment, folder)
    return side


def account(number: int) -> str:
    return f"bench{number}@example.com"


def command_line(side: Side, name: str) -> list[str]:
    arguments = COMMANDS[name]
    if arguments is None:
        return [side.python, "-c", "pass"]
    if name == "mapapi keys create":
        number = side.keys_made
        side.keys_made += 1
        email = account(number // KEYS_PER_ACCOUNT)
        arguments = [*arguments, email, "--name", f"k{number}"]
    return side.version.mapapi + arguments


def timed(command: list[str], side: Side) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``command``, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        command, env=side.environment, cwd=side.folder, capture_output=True, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure_commands(sides: list[Side], runs: int) -> None:
    names = list(COMMANDS)
    progress("commands: warming up")
    for side in sides:
        for name in names:
            timed(command_line(side, name), side)
    for round_number in range(runs):
        progress(f"commands: round {round_number + 1}/{runs}")
        order = sides if round_number % 2 else sides[::-1]
        for side in order:
            for name in names if round_number % 2 else names[::-1]:
                wall, cpu = timed(command_line(side, name), side)
                times = side.times.setdefault(name, Timed())
                times.wall.append(wall)
                times.cpu.append(cpu)


def seconds_to_stop(side: Side, command: str) -> float:
    """Start ``mapapi serve`` or ``worker``, idle, then SIGTERM: seconds until it exited 0."""
    port = free_port()
    arguments = ["serve", "--port", str(port)] if command == "serve" else ["worker"]
    log = side.folder / f"{command}.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            side.version.mapapi + arguments, env=side.environment, cwd=side.folder,
            stdout=subprocess.DEVNULL, stderr=output,
        )  # fmt: skip
    try:
        wait_until_ready(process, command, port, log)
        time.sleep(0.5)  # idle: nothing in flight
        sent = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=60)
        elapsed = time.perf_counter() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if status != 0:
        raise SystemExit(
            f"{side.version.name} {command} exited {status}:\n{log.read_text()[-2000:]}"
        )
    return elapsed


def wait_until_ready(process, command: str, port: int, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{command} exited at start:\n{log.read_text()[-2000:]}")
        if command == "worker":
            if "Delivering webhooks" in log.read_text(errors="replace"):
                return
        else:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                    return
            except OSError:
                pass
        time.sleep(0.1)
    raise SystemExit(f"{command} did not start within 60 s:\n{log.read_text()[-2000:]}")


def measure_stops(sides: list[Side], stops: int) -> None:
    for number in range(stops):
        progress(f"stopping on SIGTERM: {number + 1}/{stops}")
        for side in sides if number % 2 else sides[::-1]:
            for command in ("serve", "worker"):
                side.stops.setdefault(command, []).append(seconds_to_stop(side, command))


def median_ratio(first: list[float], second: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(first, second, strict=True))


def report(baseline: Side, current: Side, options) -> bool:
    print(f"\n## Commands ({options.runs} rounds; medians)\n")
    print(
        "| command | baseline ms | current ms | current/baseline | CPU ms baseline "
        "| CPU ms current | CPU current/baseline | x `python -c pass` (baseline) "
        "| x `python -c pass` (current) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in COMMANDS:
        old, new = baseline.times[name], current.times[name]
        print(
            f"| `{name}` | {statistics.median(old.wall) * 1000:.0f} "
            f"| {statistics.median(new.wall) * 1000:.0f} "
            f"| {median_ratio(new.wall, old.wall):.2f} "
            f"| {statistics.median(old.cpu) * 1000:.0f} "
            f"| {statistics.median(new.cpu) * 1000:.0f} "
            f"| {median_ratio(new.cpu, old.cpu):.2f} "
            f"| {median_ratio(old.wall, baseline.times['python -c pass'].wall):.1f} "
            f"| {median_ratio(new.wall, current.times['python -c pass'].wall):.1f} |"
        )
    print(f"\n## Idle process, SIGTERM to exit ({options.stops} each; medians)\n")
    print("| process | baseline s | current s |")
    print("|---|---:|---:|")
    for command in ("serve", "worker"):
        print(
            f"| `mapapi {command}` | {statistics.median(baseline.stops[command]):.2f} "
            f"| {statistics.median(current.stops[command]):.2f} |"
        )
    print("\n## Targets (issue 32)\n")
    met = True
    for what, name, other, most in TARGETS:
        compared = baseline.times[name] if other == "baseline" else current.times[other]
        ratio = median_ratio(current.times[name].wall, compared.wall)
        ok = ratio <= most
        met &= ok
        print(f"- {what}: {ratio:.2f}x (at most {most}x) {'PASS' if ok else 'FAIL'}")
    for command in ("serve", "worker"):
        seconds = statistics.median(current.stops[command])
        ok = seconds <= STOP_TARGET_SECONDS
        met &= ok
        print(
            f"- idle `mapapi {command}` exits {seconds:.2f} s after SIGTERM "
            f"(at most {STOP_TARGET_SECONDS:.0f} s) {'PASS' if ok else 'FAIL'}"
        )
    where = (
        "each in a venv of its own" if options.venvs else "both from source, in this environment"
    )
    print(f"\nbaseline: {baseline.version.description}\ncurrent: {current.version.description}")
    print(f"run: {where} ({sys.executable})")
    return met


def main(argv=None) -> int:
    options = parse_options(argv)
    with tempfile.TemporaryDirectory(prefix="mapapi-commands-") as directory:
        workdir = Path(directory)
        if options.venvs:
            versions = [
                (version, str(Path(version.mapapi[0]).with_name("python")), {})
                for version in (
                    build_baseline(options.baseline, workdir),
                    build_baseline(options.current, workdir, "current"),
                )
            ]
        else:
            versions = [
                (version, sys.executable, extra)
                for version, extra in (
                    from_source(options.baseline, workdir, "baseline"),
                    from_source(options.current, workdir, "current"),
                )
            ]
        baseline, current = (
            prepare(version, python, extra, workdir, options.runs)
            for version, python, extra in versions
        )
        sides = [baseline, current]
        measure_commands(sides, options.runs)
        measure_stops(sides, options.stops)
        met = report(baseline, current, options)
    print(f"\ncommand: python benchmarks/commands.py {' '.join(argv or sys.argv[1:])}".rstrip())
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
