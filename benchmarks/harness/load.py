"""The load phase: wrk against each server, several runs, CPU time taken."""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .scenarios import Scenario
from .servers import Processes, Server, stop_process
from .settings import LUA_SCRIPT, progress


@dataclass
class Measurement:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    #: Responses without the expected status, by class, and socket errors.
    unexpected: dict[str, int]
    server_cpu: float  # % of one core, over the measured interval
    wrk_cpu: float
    #: The bare view's requests/s around this measurement (the ratio's denominator).
    reference_rps: float = 0.0
    #: For the bare view of a run: (max - min) / mean of its measurements.
    spread: float = 0.0
    #: Events the server recorded meanwhile (None: it has no ``events`` counter).
    events: int | None = None
    #: For a scenario measured in turns (``measure_in_turn``): the rate of
    #: each turn, in order.
    turns: tuple[float, ...] = ()

    @property
    def ratio(self) -> float:
        return self.rps / self.reference_rps

    @property
    def cpu_ms_per_request(self) -> float:
        """Server CPU per request: steadier than requests/s when others share the machine."""
        return 10 * self.server_cpu / self.rps

    @property
    def events_per_second(self) -> float:
        return self.events * self.rps / self.requests


def ensure_wrk() -> str:
    """wrk's path; installs Debian's package when missing and we are root."""
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        progress("wrk is missing: installing Debian's package (apt-get install wrk)")
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "wrk"],
            check=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        found = shutil.which("wrk")
    if not found:
        raise SystemExit("wrk is not installed: apt-get install wrk (Debian/Ubuntu)")
    return found


def write_request_file(scenario: Scenario, directory: Path) -> Path:
    """The file scenario.lua reads: headers, then one request per line."""
    path = directory / f"requests-{scenario.key}.txt"
    lines = [f"H {name}: {value}" for name, value in scenario.headers.items()]
    for request in scenario.requests:
        if request.body is not None and "\n" in request.body:
            raise ValueError("request bodies must be one line of JSON")
        lines.append(f"R {request.method} {request.path} {request.body or ''}".rstrip())
    path.write_text("\n".join(lines) + "\n")
    return path


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: scenario.lua's counters, and how the table names them.
STATUS_CLASSES = {
    "s2xx": "2xx",
    "s401": "401",
    "s429": "429",
    "s4xx": "other 4xx",
    "s5xx": "5xx",
    "sother": "other status",
    "socket_errors": "socket errors",
    "timeouts": "timeouts",
}


def run_wrk(
    wrk: str,
    options,
    scenario: Scenario,
    server: Server,
    request_file: Path,
    duration: float,
    processes: Processes,
) -> Measurement:
    """One wrk run; wrk's own CPU time is the rusage of the child that just ended.

    The server's CPU time and, when it has an ``events`` counter, the events
    it recorded are read just before wrk starts and just after it ends.
    """
    command = [
        wrk,
        f"-t{options.wrk_threads}",
        f"-c{options.connections}",
        f"-d{duration}s",
        "--timeout",
        "10s",
        "-s",
        str(LUA_SCRIPT),
        server.base_url,
        "--",
        str(request_file),
    ]
    events_mark = server.events.mark() if server.events else None
    server_before, wrk_before = process_cpu_seconds(server.process.pid), children_cpu_seconds()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    processes.running.append(process)
    try:
        stdout, stderr = process.communicate(timeout=duration + 60)
    finally:
        stop_process(process)
        processes.running.remove(process)
    wrk_cpu = children_cpu_seconds() - wrk_before
    server_cpu = process_cpu_seconds(server.process.pid) - server_before
    events = server.events.since(events_mark) if server.events else None
    result = next(
        (
            json.loads(line.split(" ", 1)[1])
            for line in stdout.splitlines()
            if line.startswith("WRK_RESULT ")
        ),
        None,
    )
    if process.returncode != 0 or result is None:
        raise SystemExit(
            f"wrk failed on {scenario.label} ({process.returncode}):\n{stdout}\n{stderr}"
        )
    seconds = result["duration_us"] / 1e6
    # A 304 has no class of its own in lua/scenario.lua: it counts as "other".
    expected = {200: "s2xx", 201: "s2xx", 304: "sother", 401: "s401"}[scenario.expected_status]
    unexpected = {
        label: result[name]
        for name, label in STATUS_CLASSES.items()
        if name != expected and result[name]
    }
    return Measurement(
        rps=result["requests"] / seconds,
        p50_ms=result["p50_us"] / 1000,
        p99_ms=result["p99_us"] / 1000,
        requests=result["requests"],
        unexpected=unexpected,
        server_cpu=100 * server_cpu / seconds,
        wrk_cpu=100 * wrk_cpu / seconds,
        events=events,
    )


def load_phase(
    wrk: str,
    options,
    scenarios: list[Scenario],
    servers: dict,
    workdir: Path,
    processes: Processes,
    backend: str,
) -> list[dict[str, Measurement]]:
    """All runs; in each, the bare view is measured before, between and after the scenarios.

    A scenario's ratio divides by the mean of the two bare-view measurements
    on either side of it (or of its group of twins), seconds apart, so that
    the ratio stays honest when the speed of a shared machine drifts during
    a run.
    """
    files = {s.key: write_request_file(s, workdir) for s in scenarios}
    bare = next(s for s in scenarios if s.server == "bare")
    app_scenarios = [s for s in scenarios if s.server != "bare"]

    measure = measurer(wrk, options, servers, files, processes, f"{backend} run")
    runs = []
    for run in range(1, options.runs + 1):
        tag = f"{run}/{options.runs}"
        bares = [measure(bare, tag, options.warmup, options.bare_duration)]
        measured: dict[str, list[Measurement]] = {}
        for group in twin_groups(app_scenarios):
            if len(group) == 1:
                results = [(group[0], measure(group[0], tag, options.warmup, options.duration))]
            else:
                results = measure_in_turn(group, run, options, measure, tag)
            bares.append(measure(bare, tag, 0, options.bare_duration))
            for scenario, result in results:
                result.reference_rps = (bares[-2].rps + bares[-1].rps) / 2
                measured.setdefault(scenario.key, []).append(result)
        runs.append({key: combine(results) for key, results in measured.items()})
        runs[-1]["bare"] = combine_bare(bares)
    return runs


def measurer(wrk: str, options, servers: dict, files: dict, processes: Processes, prefix: str):
    """``measure(scenario, tag, warmup, duration)``: ``measure_scenario`` of a
    scenario on its server (``servers``) with its request file (``files``)."""

    def measure(scenario, tag, warmup, duration):
        return measure_scenario(
            wrk, options, scenario, servers[scenario.server], files[scenario.key],
            (warmup, duration), processes, f"{prefix} {tag}",
        )  # fmt: skip

    return measure


def twin_groups(scenarios: list[Scenario]) -> list[list[Scenario]]:
    """The scenarios in order, each with its twins (``Scenario.twin``) in one group."""
    twins: dict[str, list[Scenario]] = {}
    for scenario in scenarios:
        if scenario.twin:
            twins.setdefault(scenario.twin, []).append(scenario)
    return [[s, *twins.get(s.key, [])] for s in scenarios if not s.twin]


#: How long each turn of a group of twins lasts, in seconds.
TURN_SECONDS = 1


def measure_in_turn(group: list[Scenario], run: int, options, measure, tag: str):
    """A scenario and its twins, each warmed up, then measured in turns of
    ``TURN_SECONDS``: ``options.turns`` rounds, every server once a round,
    the order reversed each round (and from the other end in even runs).

    A shared machine's speed moves by 10% and more from one second to the
    next, so one pair of measurements says little about a few per cent. Two
    servers measured a second each, one right after the other, see nearly
    the same machine; the comparison reads the median of many such pairs
    (``turn_ratios``), which one slow second cannot move. (Measured instead
    as ``A B C C B A``, 3 s each and averaged, mapapi serve and a twin
    doing the same work came out up to 10% apart, run after run.)
    """
    for scenario in group:
        measure(scenario, tag + " warm-up", options.warmup, 0)
    taken: dict[str, list[Measurement]] = {scenario.key: [] for scenario in group}
    for round_number in range(options.turns):
        order = group if (run + round_number) % 2 else group[::-1]
        for scenario in order:
            taken[scenario.key].append(measure(scenario, tag, 0, TURN_SECONDS))
    by_key = {scenario.key: scenario for scenario in group}
    return [(by_key[key], combine(results)) for key, results in taken.items()]


def turn_ratios(first: Measurement, second: Measurement) -> list[float]:
    """The ratio of two scenarios' rates turn by turn (one ratio without turns)."""
    pairs = zip(first.turns or (first.rps,), second.turns or (second.rps,), strict=True)
    return [a / b for a, b in pairs]


def measure_scenario(
    wrk: str,
    options,
    scenario: Scenario,
    server: Server,
    request_file: Path,
    seconds: tuple[float, float],
    processes: Processes,
    tag: str,
) -> Measurement | None:
    """A warm-up wrk run whose figures are dropped (none for 0 s), then the measured one.

    ``seconds`` is (warm-up, measured; none for 0 s); ``tag`` names the run
    in the progress line. A switchable twin is first put in the scenario's
    state (``Scenario.switch``).
    """
    if scenario.switch:
        server.process.send_signal(scenario.switch)
    warmup, duration = seconds
    if warmup > 0:
        run_wrk(wrk, options, scenario, server, request_file, warmup, processes)
    if not duration:
        return None
    result = run_wrk(wrk, options, scenario, server, request_file, duration, processes)
    progress(
        f"  [{tag}] {scenario.label:<28} "
        f"{result.rps:8.1f} req/s  p50 {result.p50_ms:6.1f} ms  "
        f"p99 {result.p99_ms:6.1f} ms  (server {result.server_cpu:.0f}% "
        f"wrk {result.wrk_cpu:.0f}% CPU)"
    )
    return result


def merge_counts(counts) -> dict[str, int]:
    merged: dict[str, int] = {}
    for one in counts:
        for label, count in one.items():
            merged[label] = merged.get(label, 0) + count
    return merged


def combine(measurements: list[Measurement]) -> Measurement:
    """One run's figure for a scenario measured several times: the mean of
    its measurements (counts summed), their spread, and each one's rate."""
    if len(measurements) == 1:
        return measurements[0]
    rps = statistics.mean(m.rps for m in measurements)
    events = [m.events for m in measurements]
    return Measurement(
        rps=rps,
        p50_ms=statistics.mean(m.p50_ms for m in measurements),
        p99_ms=statistics.mean(m.p99_ms for m in measurements),
        requests=sum(m.requests for m in measurements),
        unexpected=merge_counts(m.unexpected for m in measurements),
        server_cpu=statistics.mean(m.server_cpu for m in measurements),
        wrk_cpu=statistics.mean(m.wrk_cpu for m in measurements),
        reference_rps=statistics.mean(m.reference_rps for m in measurements),
        spread=(max(m.rps for m in measurements) - min(m.rps for m in measurements)) / rps,
        events=None if None in events else sum(events),
        turns=tuple(m.rps for m in measurements),
    )


def combine_bare(bares: list[Measurement]) -> Measurement:
    """One run's bare-view figure: the mean of its measurements, and their spread."""
    combined = combine(bares)
    combined.reference_rps = combined.rps
    return combined


