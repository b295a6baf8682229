#!/usr/bin/env python3
"""mapapi's benchmark: requests/s and latency of the hot paths over real HTTP.

One command, ``python benchmarks/run.py``, does everything (see README.md):

1. seeds a fresh database (SQLite in a temporary folder; PostgreSQL too when
   ``MAPAPI_DATABASE_URL`` points at one) through the app's own tables;
2. counts the SQL statements of one request per scenario in-process;
3. serves the app with ``mapapi serve --threads 8`` and a bare Flask JSON view
   with the same waitress settings, each in its own process;
4. drives each scenario with wrk from another process, several runs;
5. prints one table (medians over the runs) and the targets of issue 6;
6. measures what keeping another system in step costs (harness/sync.py): the
   upsert of 100 beside the bulk create, the events each write scenario
   records per second, and webhook deliveries per second.

``--baseline REV`` also measures the mapapi of git revision REV against the
current one in the same run (harness/baseline.py); ``--baseline-only`` runs
just that comparison.

Every process it starts is stopped on the way out, Ctrl-C and errors included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from harness.answers import check_same_answers
from harness.baseline import compare_versions, comparison_seconds
from harness.baseline_report import comparison_json, print_comparison
from harness.data import database_for, seed_database
from harness.event_count import EventCounter
from harness.load import TURN_SECONDS, ensure_wrk, load_phase
from harness.profiling import profile_endpoints
from harness.report import (
    code_description,
    evaluate_targets,
    load_average,
    median_rows,
    print_report,
)
from harness.scenarios import (
    SWITCHES,
    TWIN_SERVERS,
    TWINS,
    build_scenarios,
    reference_scenarios,
    statement_probes,
    twin_scenarios,
)
from harness.servers import (
    Processes,
    start_app_server,
    start_bare_server,
    start_floor_server,
    start_peer_server,
    start_twin_server,
    stop_server,
)
from harness.settings import progress
from harness.statements import count_statements
from harness.sync import (
    WRK_WRITES,
    count_sync_statements,
    measure_webhooks,
    measure_writes,
    summary,
    sync_seconds,
)
from harness.sync_report import print_sync_header, print_sync_report


def parse_options(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="load runs; the table shows medians (3)"
    )
    parser.add_argument("--duration", type=int, default=6, help="seconds per scenario (6)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up seconds before each (1)")
    parser.add_argument(
        "--bare-duration", type=int, default=3, help="seconds of each bare-view measurement (3)"
    )
    parser.add_argument(
        "--turns",
        type=int,
        default=8,
        help=f"rounds of {TURN_SECONDS} s turns in which a scenario and its twins are "
        "measured, each run (8)",
    )
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (16)")
    parser.add_argument("--wrk-threads", type=int, default=2, help="wrk threads (2)")
    parser.add_argument(
        "--sqlite-only",
        action="store_true",
        help="skip PostgreSQL even when MAPAPI_DATABASE_URL names one",
    )
    parser.add_argument("--show-sql", action="store_true", help="list each scenario's statements")
    parser.add_argument("--json", type=Path, help="also write the raw figures to this file")
    parser.add_argument(
        "--profile",
        type=int,
        metavar="N",
        nargs="?",
        const=500,
        help="instead of the load phase, profile N in-process requests of "
        "GET /maps/:id, the page of 100, a single create and a bulk (needs pyinstrument)",
    )
    parser.add_argument(
        "--no-references",
        action="store_true",
        help="measure mapapi and the bare view only (no floor, no FastAPI peer)",
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also measure the mapapi of git revision REV against the current one, "
        "each scenario on both servers in turn, and report current/baseline",
    )
    parser.add_argument(
        "--baseline-only",
        action="store_true",
        help="with --baseline: only the comparison, not the main table",
    )
    parser.add_argument(
        "--sync-only",
        action="store_true",
        help="only the sync measurements: upserts beside the bulk, events/s of the write "
        "scenarios, webhook deliveries/s",
    )
    parser.add_argument(
        "--sync-threads", type=int, default=8, help="threads of the upserts' load driver (8)"
    )
    parser.add_argument(
        "--webhook-events",
        type=int,
        default=2000,
        help="events delivered by each deliverer (rounded up to 100s; 2000)",
    )
    options = parser.parse_args(argv)
    if options.baseline_only and not options.baseline:
        parser.error("--baseline-only needs --baseline REV")
    if options.baseline and options.profile is not None:
        parser.error("--baseline and --profile do not go together")
    if options.baseline_only and options.sync_only:
        parser.error("--baseline-only and --sync-only do not go together")
    return options


def backends(options) -> list[str]:
    names = ["sqlite"]
    url = os.environ.get("MAPAPI_DATABASE_URL", "")
    if url.startswith("postgresql") and not options.sqlite_only and options.profile is None:
        names.append("postgresql")
    return names


def benchmark_backend(backend, options, wrk, workdir, processes, servers) -> dict:
    """Seed, count statements, serve, load: the figures of one database."""
    with database_for(backend, workdir) as url:
        progress(f"{backend}: seeding")
        seeded = seed_database(url)
        scenarios = build_scenarios(seeded)
        if options.profile is not None:
            profile_endpoints(url, scenarios, options.profile, workdir)
            return {}
        progress(f"{backend}: counting SQL statements in-process")
        if options.sync_only:
            scenarios = [s for s in scenarios if s.key == "bare" or s.key in WRK_WRITES]
            statements = {}
        else:
            statements = count_statements(url, scenarios + statement_probes(seeded, scenarios))
        sync_statements = count_sync_statements(url, seeded)
        with_references = not (options.no_references or options.sync_only)
        if with_references:
            scenarios += reference_scenarios(scenarios)
        if not options.sync_only:
            scenarios += twin_scenarios(scenarios)
        progress(f"{backend}: starting mapapi serve and the references")
        started = {"app": start_app_server(processes, url, workdir, backend)}
        started["app"].events = counter = EventCounter(url)
        try:
            if not options.sync_only:
                for twin in TWIN_SERVERS:
                    started[twin] = start_twin_server(processes, twin, url, workdir, backend)
            if with_references:
                started["floor"] = start_floor_server(processes, url, workdir, backend)
                started["peer"] = start_peer_server(processes, url, workdir, backend)
                references = {name: started[name] for name in ("floor", "peer")}
                check_same_answers(started["app"], references, scenarios)
            runs = load_phase(
                wrk, options, scenarios, {**servers, **started}, workdir, processes, backend
            )
            progress(f"{backend}: the upserts beside the bulk create")
            sync_runs = measure_writes(options, seeded, started["app"], backend)
        finally:
            counter.close()
            for server in started.values():
                stop_server(processes, server)
        progress(f"{backend}: webhook deliveries")
        deliveries = measure_webhooks(options, url, seeded, workdir, processes, backend)
        sync = summary(options, scenarios, runs, sync_runs, sync_statements, deliveries)
        if options.sync_only:
            return {"backend": backend, "sync": sync}
        app_server = started["app"]
        rows = median_rows(scenarios, runs, statements)
        targets, extra = evaluate_targets(runs, statements)
        return {
            "backend": backend,
            "sync": sync,
            "rows": rows,
            "targets": targets,
            "extra": extra,
            "runs": runs,
            "statements": statements,
            "seeded": seeded.counts,
            "access_log_lines": count_access_lines(app_server.log_path),
        }


def count_access_lines(log_path: Path) -> int:
    """How many access-log lines the server wrote (0 means its access log was off)."""
    try:
        return sum('"method"' in line for line in log_path.read_text(errors="replace").splitlines())
    except OSError:
        return 0


def keep_logs_after_errors(results: list[dict], workdir: Path) -> None:
    """Copy the servers' logs out of the scratch folder when any answer was a
    5xx, so that what the server logged about it survives the run."""
    failed = [
        f"{result['backend']}: {row.scenario.label}"
        for result in results
        for row in result.get("rows", [])
        if "5xx" in row.unexpected
    ]
    if not failed:
        return
    kept = Path(tempfile.mkdtemp(prefix="mapapi-bench-logs-"))
    for log in workdir.glob("server-*.log"):
        shutil.copy2(log, kept)
    progress(f"a 5xx was answered ({'; '.join(failed)}): the servers' logs are kept in {kept}")


def write_json(path: Path, results: list[dict], options, comparison: dict | None) -> None:
    def plain(result):
        if options.sync_only:
            return result
        return {
            "backend": result["backend"],
            "sync": result["sync"],
            "rows": [
                {"scenario": r.scenario.key, "label": r.scenario.label}
                | {name: value for name, value in vars(r).items() if name != "scenario"}
                for r in result["rows"]
            ],
            "targets": [vars(t) for t in result["targets"]],
            "extra": result["extra"],
            "runs": [{k: vars(m) for k, m in run.items()} for run in result["runs"]],
            "statements": result["statements"],
            "seeded": result["seeded"],
            "access_log_lines": result["access_log_lines"],
        }

    path.write_text(
        json.dumps(
            {
                "options": {k: str(v) for k, v in vars(options).items()},
                "results": [plain(r) for r in results],
            }
            | ({"baseline": comparison_json(comparison)} if comparison else {}),
            indent=1,
        )
    )


def main(argv=None) -> int:
    options = parse_options(argv)
    started, load_before, code = time.monotonic(), load_average(), code_description()
    # SIGTERM unwinds like Ctrl-C does, through every finally that stops a process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    names = backends(options)
    wrk = ensure_wrk() if options.profile is None else None
    # mapapi's scenarios and the references'; the bare view is measured before and after each
    if options.sync_only:
        scenarios, groups = len(WRK_WRITES), 0
    else:
        # A scenario with twins is measured with them in turns (load.measure_in_turn).
        copies = [keys for _, keys in TWINS.values()] + [
            keys for keys, states in SWITCHES.values() for _ in states
        ]
        twinned = {key for keys in copies for key in keys}
        servers = len(twinned) + sum(len(keys) for keys in copies)
        scenarios = 18 - len(twinned) + (0 if options.no_references else 6)
        groups = len(twinned) * options.bare_duration + servers * (
            options.warmup + options.turns * TURN_SECONDS
        )
    per_run = scenarios * (options.duration + options.warmup + options.bare_duration) + groups
    slots = 0 if options.baseline_only else (
        len(names) * options.runs * (per_run + options.bare_duration + options.warmup)
        + len(names) * sync_seconds(options)
    )
    if options.baseline:
        slots += comparison_seconds(options, len(names))
    if options.profile is None:
        progress(f"backends: {', '.join(names)}; the load phase takes about {slots / 60:.1f} min")
    processes = Processes()
    results, comparison = [], None
    with tempfile.TemporaryDirectory(prefix="mapapi-bench-") as directory:
        workdir = Path(directory)
        # The app reads instance/config.py from its instance folder: keep the
        # benchmark independent of whatever the checkout's instance/ holds.
        os.environ["MAPAPI_INSTANCE_PATH"] = str(workdir)
        try:
            servers = {}
            if options.profile is None and not options.baseline_only:
                servers["bare"] = start_bare_server(processes, workdir)
            for backend in [] if options.baseline_only else names:
                result = benchmark_backend(backend, options, wrk, workdir, processes, servers)
                if result:
                    results.append(result)
            if options.baseline:
                comparison = compare_versions(options, names, wrk, workdir, processes)
        except KeyboardInterrupt:
            progress("interrupted: stopping the servers")
            return 130
        finally:
            processes.stop_all()
        keep_logs_after_errors(results, workdir)
    if options.profile is not None:
        return 0
    if options.sync_only:
        print_sync_header(load_before, code)
    all_met = True
    if results:
        all_met = options.sync_only or print_report(results, options, load_before, code)
        all_met &= print_sync_report(results, options)
    if comparison:
        all_met &= print_comparison(comparison, options)
    for result in results:
        if result.get("access_log_lines") == 0:
            print(
                f"note ({result['backend']}): the server wrote no access-log lines during the "
                "run: its access log was off."
            )
    if options.json:
        write_json(options.json, results, options, comparison)
    print(
        f"\ncommand: python benchmarks/run.py {' '.join(argv or sys.argv[1:])}".rstrip()
        + f"   total time {(time.monotonic() - started) / 60:.1f} min"
    )
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
