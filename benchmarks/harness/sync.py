"""The sync measurements of issues 17 and 23, beside the main table.

1. The upsert of 100 (all new, all changed, all unchanged) beside a bulk
   create of 100, driven by ``sync_driver.py``, with the SQL statements of
   each counted in-process (with 1 item and with 100).
2. The events each write scenario records per second: wrk's (a single
   create, the bulk, layer memberships, the replay) and the driver's.
3. Webhook deliveries per second to a local receiver (``deliveries.py``).

Each summary is a list of plain dicts: the report prints them, ``--json``
writes them as they are.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict

from .deliveries import measure_deliveries
from .load import merge_counts
from .settings import BULK_SIZE, progress
from .statements import count_statements
from .sync_driver import SyncLoad, drive
from .sync_writes import MODES, auth_headers, statement_scenarios

#: The main table's scenarios that write; --sync-only measures these and the bare view.
WRK_WRITES = ("create", "bulk", "layers", "replay")


def count_sync_statements(url: str, seeded) -> dict[str, int]:
    """SQL statements of one request of each mode, with 1 item and with 100."""
    counted = count_statements(url, statement_scenarios(seeded))
    return {key: value["count"] for key, value in counted.items()}


def sync_seconds(options) -> float:
    """About how long the sync measurements take on one database."""
    webhooks = 30  # three backlogs of 2,000 events, at several hundred a second
    return options.runs * len(MODES) * (options.warmup + options.duration) + webhooks


def measure_writes(options, seeded, server, backend: str) -> list[dict]:
    """Every mode in turn, ``options.runs`` times: the driver's Measurements by mode."""
    load = SyncLoad(server, seeded, auth_headers(seeded), options.sync_threads)
    runs = []
    for run in range(1, options.runs + 1):
        measured = {}
        for mode in MODES:
            result = drive(load, mode, f"r{run}", options.warmup, options.duration)
            progress(
                f"  [{backend} run {run}/{options.runs}] {mode.label:<34} "
                f"{result.rps:8.1f} req/s  p50 {result.p50_ms:6.1f} ms  "
                f"(server {result.server_cpu:.0f}% driver {result.wrk_cpu:.0f}% CPU)"
            )
            measured[mode.key] = result
        runs.append(measured)
    return runs


def measure_webhooks(options, url, seeded, workdir, processes, backend: str) -> list[dict]:
    results = measure_deliveries(url, seeded, options.webhook_events, workdir, processes, backend)
    return [asdict(result) | {"per_second": result.per_second,
                              "unexpected": result.unexpected} for result in results]  # fmt: skip


def write_rows(sync_runs: list[dict], statements: dict[str, int]) -> list[dict]:
    """The upsert table: medians over the runs; "vs bulk" taken within each run."""
    rows = []
    for mode in MODES:
        series = [run[mode.key] for run in sync_runs]
        rows.append({
            "key": mode.key,
            "label": mode.label,
            "rps": median(m.rps for m in series),
            "locations_per_second": median(m.rps * BULK_SIZE for m in series),
            "versus_bulk": median(run[mode.key].rps / run[MODES[0].key].rps for run in sync_runs),
            "p50_ms": median(m.p50_ms for m in series),
            "p99_ms": median(m.p99_ms for m in series),
            "cpu_ms": median(m.cpu_ms_per_request for m in series),
            "server_cpu": median(m.server_cpu for m in series),
            "driver_cpu": median(m.wrk_cpu for m in series),
            "statements_1": statements.get(f"{mode.key}_1"),
            "statements_100": statements.get(f"{mode.key}_{BULK_SIZE}"),
            "unexpected": merge_counts(m.unexpected for m in series),
        })  # fmt: skip
    return rows


def event_rows(scenarios, runs: list[dict], sync_runs: list[dict], threads: int) -> list[dict]:
    """Events per second of every write measured: wrk's scenarios, then the driver's modes."""
    labels = {s.key: (s.label, "wrk") for s in scenarios if s.key in WRK_WRITES}
    labels |= {mode.key: (mode.label, f"{threads} threads") for mode in MODES}
    every = [{**run, **sync} for run, sync in zip(runs, sync_runs, strict=True)]
    rows = []
    for key, (label, driver) in labels.items():
        series = [run[key] for run in every]
        rows.append({
            "key": key,
            "label": label,
            "driver": driver,
            "rps": median(m.rps for m in series),
            "events_per_second": median(m.events_per_second for m in series),
            "events_per_request": median(m.events / m.requests for m in series),
        })  # fmt: skip
    return rows


def median(values) -> float:
    return statistics.median(list(values))


def summary(options, scenarios, runs, sync_runs, statements, deliveries) -> dict:
    """Everything the report prints and --json writes about the sync measurements."""
    return {
        "threads": options.sync_threads,
        "writes": write_rows(sync_runs, statements),
        "events": event_rows(scenarios, runs, sync_runs, options.sync_threads),
        "deliveries": deliveries,
        "statements": statements,
        "runs": [{key: vars(m) for key, m in run.items()} for run in sync_runs],
    }
