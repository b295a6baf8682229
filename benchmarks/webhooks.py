#!/usr/bin/env python3
"""Webhook delivery by one worker, of two versions: deliveries/s, a victim's latency under attack.

``python benchmarks/webhooks.py [--baseline main]`` extracts the baseline
revision into a venv of its own (as ``run.py --baseline`` does), then for
SQLite, and PostgreSQL when ``MAPAPI_DATABASE_URL`` names a server, runs
the measurements of harness/fair_deliveries.py on both versions: deliveries
per second to one endpoint and to ten (``--runs`` times, the versions in
turns), then the latency of a victim's 20 events while another account
attacks (endpoints that never answer, names whose lookup hangs, a flood of
events). Prints one table, and each comparison's median ratio.

Every process it starts is stopped on the way out, Ctrl-C and errors included.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness.baseline import build_baseline, current_version
from harness.fair_deliveries import SPREAD, Results, measure_backend
from harness.report import load_average
from harness.servers import Processes
from harness.settings import progress


def parse_options(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--baseline", metavar="REV", default="main", help="the revision to compare with (main)"
    )
    parser.add_argument(
        "--events",
        type=int,
        default=2000,
        help="deliveries of each throughput backlog, rounded up to 100s per endpoint (2000)",
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="throughput runs of each version, in turns (3)"
    )
    parser.add_argument(
        "--sqlite-only",
        action="store_true",
        help="skip PostgreSQL even when MAPAPI_DATABASE_URL names one",
    )
    return parser.parse_args(argv)


def backends(options) -> list[str]:
    url = os.environ.get("MAPAPI_DATABASE_URL", "")
    postgres = url.startswith("postgresql") and not options.sqlite_only
    return ["sqlite", "postgresql"] if postgres else ["sqlite"]


def print_table(results: list[Results], runs: int, load_before: str, seconds: float) -> None:
    print()
    print(
        f"webhook delivery by one `mapapi worker`: deliveries/s the median of {runs} run(s), "
        f"the versions in turns (load average {load_before} before, {load_average()} after; "
        f"{seconds / 60:.1f} min)"
    )
    print()
    print(
        f"| db | version | deliveries/s, 1 endpoint | deliveries/s, {SPREAD} endpoints | "
        "victim's 20 events under attack: arrived, median, max |"
    )
    print("|---|---|---:|---:|---|")
    for result in results:
        print(
            f"| {result.backend} | {result.version.description} | "
            f"{result.median_per_second(1):,.0f} | {result.median_per_second(SPREAD):,.0f} | "
            f"{result.attack.summary()} |"
        )
    print()
    for baseline, current in zip(results[::2], results[1::2], strict=True):
        ratios = [
            f"{endpoints} endpoint(s) {median_ratio(current, baseline, endpoints):.0%}"
            for endpoints in (1, SPREAD)
        ]
        joined = ", ".join(ratios)
        print(f"{current.backend}: current/baseline, median of the runs' ratios: {joined}")
    for result in results:
        for endpoints, measured in result.throughput.items():
            for run in measured:
                if run.received != run.deliveries or run.duplicates or run.refused:
                    print(
                        f"unexpected: {result.backend} {result.version.name} {endpoints} "
                        f"endpoint(s): {run.received}/{run.deliveries} received, "
                        f"{run.duplicates} duplicates, {run.refused} refused"
                    )


def median_ratio(current: Results, baseline: Results, endpoints: int) -> float:
    """The median over runs of current/baseline deliveries/s, each run's pair measured in turn."""
    pairs = zip(current.throughput[endpoints], baseline.throughput[endpoints], strict=True)
    return statistics.median(now.per_second / before.per_second for now, before in pairs)


def main(argv=None) -> int:
    options = parse_options(argv)
    started, load_before = time.monotonic(), load_average()
    # SIGTERM unwinds like Ctrl-C does, through every finally that stops a process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    processes = Processes()
    results = []
    with tempfile.TemporaryDirectory(prefix="mapapi-webhooks-") as directory:
        workdir = Path(directory)
        os.environ["MAPAPI_INSTANCE_PATH"] = str(workdir)
        try:
            versions = [build_baseline(options.baseline, workdir), current_version()]
            for backend in backends(options):
                progress(f"{backend}: {' against '.join(v.description for v in versions)}")
                results += measure_backend(
                    versions, backend, options.events, options.runs, workdir, processes
                )
        except KeyboardInterrupt:
            progress("interrupted: stopping the processes")
            return 130
        finally:
            processes.stop_all()
    print_table(results, options.runs, load_before, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
