"""The printed section of the sync measurements (``sync.py``), after the main table."""

from __future__ import annotations

from .report import load_average, machine_description
from .settings import BULK_SIZE


def print_sync_header(load_before: str, code: str) -> None:
    """What the main table's header says of the run, for --sync-only."""
    print()
    print("mapapi benchmark, the sync measurements only (--sync-only)")
    print(
        f"machine: {machine_description()}; load average (1/5/15 min) before {load_before}, "
        f"after {load_average()}"
    )
    print(f"code: {code} (at the start of the run)")


def print_sync_report(results: list[dict], options) -> bool:
    """Three short tables; whether every answer and every delivery was as expected."""
    threads = results[0]["sync"]["threads"]
    writes = [(result["backend"], row) for result in results for row in result["sync"]["writes"]]
    events = [(result["backend"], row) for result in results for row in result["sync"]["events"]]
    deliveries = [
        (result["backend"], row) for result in results for row in result["sync"]["deliveries"]
    ]
    section(
        f"upsert of {BULK_SIZE} beside the bulk create (issue 23): {threads} threads over "
        f"keep-alive HTTP, each writing its own items, {options.duration:g} s per mode, median "
        f"of {options.runs} run(s); every answer's status and counts checked; SQL/req counted "
        f"in-process, for 1 item and for {BULK_SIZE}",
        ["text:db", "text:write", "req/s", "locations/s", "vs bulk", "p50 ms", "p99 ms",
         "CPU ms/req", "server CPU", "driver CPU", "SQL/req (1 / 100 items)"],
        [[backend, row["label"] + flagged(row["unexpected"]), f"{row['rps']:,.1f}",
          f"{row['locations_per_second']:,.0f}", f"{row['versus_bulk']:.0%}",
          f"{row['p50_ms']:.1f}", f"{row['p99_ms']:.1f}", f"{row['cpu_ms']:.1f}",
          f"{row['server_cpu']:.0f}%", f"{row['driver_cpu']:.0f}%",
          f"{count(row['statements_1'])} / {count(row['statements_100'])}"]
         for backend, row in writes],
        "(the creating modes write into the writes map, which they grow; the changing modes "
        "into a 500-location map the main table leaves alone, holding their sets, and into "
        "the big map; SQL/req is not counted in the big map, which the main table reads)",
    )  # fmt: skip
    section(
        "events recorded per second under each write scenario (issue 17): rows the events "
        "table gained during the measurement, over its seconds",
        ["text:db", "text:scenario", "text:driver", "req/s", "events/s", "events/req"],
        [[backend, row["label"], row["driver"], f"{row['rps']:,.1f}",
          f"{row['events_per_second']:,.0f}", f"{row['events_per_request']:.1f}"]
         for backend, row in events],
        "(wrk's events/req is approximate: the requests in flight when a wrk run starts or "
        "stops record events that run does not count; the driver's is exact)",
    )  # fmt: skip
    section(
        f"webhook deliveries per second to a receiver on 127.0.0.1 (issue 17): a backlog of "
        f"{options.webhook_events} location.created events, every delivery's signature verified "
        "with standardwebhooks; deliveries/s from the first arrival to the last",
        ["text:db", "text:delivered by", "events", "deliveries/s", "all received after s",
         "deliverer CPU ms/delivery", "receiver CPU"],
        [[backend, row["deliverer"] + flagged(row["unexpected"]), f"{row['events']:,}",
          f"{row['per_second']:,.0f}", f"{row['all_after']:.1f}", f"{row['cpu_ms']:.2f}",
          f"{row['receiver_cpu']:.0f}%"]
         for backend, row in deliveries],
    )  # fmt: skip
    return not any(row["unexpected"] for _, row in writes + deliveries)


def section(intro: str, columns: list[str], rows: list[list[str]], note: str = "") -> None:
    """A line saying what the table is, then the table, in Markdown: the
    columns named ``text:`` left-aligned, the figures right-aligned."""
    aligned = ["---" if column.startswith("text:") else "---:" for column in columns]
    columns = [column.removeprefix("text:") for column in columns]
    print()
    print(intro)
    print()
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join(aligned) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if note:
        print(note)


def count(statements: int | None) -> str:
    return "-" if statements is None else str(statements)


def flagged(unexpected: dict[str, int]) -> str:
    if not unexpected:
        return ""
    return f" (unexpected: {', '.join(f'{count} {label}' for label, count in unexpected.items())})"
