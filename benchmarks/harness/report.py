"""The results: medians, ratios, targets and the printed table."""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .load import merge_counts, turn_ratios
from .scenarios import GUARDED_SCENARIOS, METRICS_SCENARIOS, RETRY_SCENARIOS, TWINS, Scenario
from .settings import BULK_SIZE, SERVER_THREADS, SMALL_STATEMENT_COUNT


@dataclass
class Row:
    scenario: Scenario
    rps: float
    p50_ms: float
    p99_ms: float
    ratio: float
    statements: int | None
    server_cpu: float
    cpu_ms: float
    wrk_cpu: float
    unexpected: dict[str, int]


@dataclass
class Target:
    name: str
    value: str
    goal: str
    met: bool


def median_rows(scenarios, runs, statements) -> list[Row]:
    """Per scenario, the median over runs of each figure (ratios taken within a run)."""
    rows = []
    for scenario in scenarios:
        series = [run[scenario.key] for run in runs]
        ratios = [run[scenario.key].ratio for run in runs]
        rows.append(
            Row(
                scenario=scenario,
                rps=statistics.median(m.rps for m in series),
                p50_ms=statistics.median(m.p50_ms for m in series),
                p99_ms=statistics.median(m.p99_ms for m in series),
                ratio=statistics.median(ratios),
                statements=statements.get(scenario.key, {}).get("count"),
                server_cpu=statistics.median(m.server_cpu for m in series),
                cpu_ms=statistics.median(m.cpu_ms_per_request for m in series),
                wrk_cpu=statistics.median(m.wrk_cpu for m in series),
                unexpected=merge_counts(m.unexpected for m in series),
            )
        )
    return rows


def evaluate_targets(runs, statements) -> tuple[list[Target], dict]:
    """Issue 6, point 3: each ratio is taken within a run, then the median of the runs."""
    get_map = statistics.median(r["get_map"].ratio for r in runs)
    page = statistics.median(r["list_100"].ratio for r in runs)
    bulk = statistics.median(r["bulk"].rps * BULK_SIZE / r["create"].rps for r in runs)
    deep = statistics.median(r["page_1000"].p50_ms / r["page_1"].p50_ms for r in runs)
    deep_p99 = statistics.median(r["page_1000"].p99_ms / r["page_1"].p99_ms for r in runs)
    counts = {key: value["count"] for key, value in statements.items()}
    lists = [counts[k] for k in ("list_1", "list_100", "page_1", "page_1000")]
    sql_ok = (
        all(count <= SMALL_STATEMENT_COUNT for count in counts.values())
        and len(set(lists)) == 1
        and counts["bulk"] - counts["bulk_1"] <= 2
    )
    sql_value = (
        f"max {max(counts.values())}; lists {'/'.join(map(str, lists))} "
        f"(pageSize 1/100, p1/p1000); bulk 1/100: {counts['bulk_1']}/{counts['bulk']}"
    )
    targets = [
        Target("GET /maps/:id vs bare view", percent(get_map), ">= 50%", get_map >= 0.50),
        Target("page of 100 (layers, tags) vs bare view", percent(page), ">= 20%", page >= 0.20),
        Target("bulk of 100 vs single creates, locations/s", f"{bulk:.1f}x", ">= 25x", bulk >= 25),
        Target("page 1000 vs page 1, p50 latency", f"{deep:.2f}x", "<= 2x", deep <= 2.0),
        Target(
            "SQL statements per request",
            sql_value,
            f"<= {SMALL_STATEMENT_COUNT}, same for any page/bulk size",
            sql_ok,
        ),
    ]
    extra = {"bulk_ratio": bulk, "deep_page_p50": deep, "deep_page_p99": deep_p99}
    targets += filtered_pages(runs)
    replay = statistics.median(r["replay"].rps / r["create"].rps for r in runs)
    targets.append(
        Target("a replayed POST vs the POST, req/s", f"{replay:.2f}x", "> 1x", replay > 1)
    )
    # The twins are always measured with the table (only --sync-only skips both).
    targets += versus_twins(runs)
    extra["control"] = versus_itself(runs)
    if "floor_get_map" in runs[0]:
        reference_targets = versus_references(runs)
        targets += reference_targets
        extra["references"] = {t.name: t.value for t in reference_targets}
    return targets, extra


def filtered_pages(runs) -> list[Target]:
    """Issue 15: a filter that selects little of the 100,000 locations costs
    what a page of a 500-location map costs (within 2x, in req/s)."""
    targets = []
    for key in [k for k in runs[0] if k.startswith("filter_")]:
        cost = statistics.median(r["list_100"].rps / r[key].rps for r in runs)
        targets.append(
            Target(f"{key.removeprefix('filter_')} filter on the big map vs page of 500-map",
                   f"{cost:.2f}x the time", "<= 2x", cost <= 2.0)
        )  # fmt: skip
    return targets


#: Issue 19: mapapi's share of the floor's requests/s, per scenario.
FLOOR_GOALS = {"get_map": 0.80, "bad_key": 0.80, "list_100": 1.00}
#: ... and how many times the FastAPI peer's it serves.
PEER_GOAL = 2.0


def versus_references(runs) -> list[Target]:
    """Each ratio within a run (the two servers minutes apart at most), then the median."""

    def ratio(key: str, reference: str) -> float:
        return statistics.median(r[key].rps / r[f"{reference}_{key}"].rps for r in runs)

    targets = []
    for key, goal in FLOOR_GOALS.items():
        value = ratio(key, "floor")
        targets.append(
            Target(f"{LABELS[key]} vs the floor", percent(value), f">= {percent(goal)}", value >= goal)
        )
    for key in FLOOR_GOALS:
        value = ratio(key, "peer")
        targets.append(
            Target(
                f"{LABELS[key]} vs the FastAPI peer",
                f"{value:.2f}x",
                f">= {PEER_GOAL:.0f}x",
                value >= PEER_GOAL,
            )
        )
    return targets


LABELS = {
    "get_map": "GET /maps/:id",
    "bad_key": "bad key (401)",
    "list_100": "page of 100",
    "create": "POST location",
}

#: What a part of mapapi may cost a request that does not use it, as pairs
#: of scenarios measured in turn: its connection guards (issue 22), mapapi
#: serve against plain waitress; the steps of safe retries for a request
#: with neither Idempotency-Key nor a precondition (issue 16), and the
#: per-request step of the metrics (issue 32), each switched on and off in
#: one process. (name, least ratio, key prefixes, scenarios)
TWIN_GOALS = [
    ("mapapi serve vs plain waitress (issue 22)", 0.95, ("", "unguarded_"), GUARDED_SCENARIOS),
    (
        "retry steps on vs off, one process (issue 16)",
        0.95,
        ("retries_on_", "retries_off_"),
        RETRY_SCENARIOS,
    ),
    (
        "metrics on vs off, one process (issue 32)",
        0.97,
        ("metrics_on_", "metrics_off_"),
        METRICS_SCENARIOS,
    ),
]


def versus_twins(runs) -> list[Target]:
    """Each pair of ``TWIN_GOALS``, per scenario: the median of the ratios of
    the turns the two were measured in, over all runs."""
    targets = []
    for name, least, (first, second), keys in TWIN_GOALS:
        for key in keys:
            value = median_turn_ratio(runs, first + key, second + key)
            targets.append(
                Target(
                    f"{LABELS[key]}: {name}", percent(value), f">= {percent(least)}", value >= least
                )
            )
    return targets


def median_turn_ratio(runs, first: str, second: str) -> float:
    return statistics.median(
        ratio for run in runs for ratio in turn_ratios(run[first], run[second])
    )


def versus_itself(runs) -> dict[str, str]:
    """The control: mapapi serve against a second mapapi serve, measured like
    the twins; not a target, but how finely two processes can be compared."""
    _, keys = TWINS["again"]
    return {LABELS[key]: percent(median_turn_ratio(runs, key, f"again_{key}")) for key in keys}


TABLE_HEADER = [
    "| db | scenario | req/s | p50 ms | p99 ms | vs bare | SQL/req "
    "| server CPU | CPU ms/req | wrk CPU |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
]


def table_rows(backend: str, rows: list[Row]) -> list[str]:
    """Rows of a Markdown table, so that it can be pasted into RESULTS.md as printed."""
    lines = []
    for row in rows:
        flag = ""
        if row.unexpected:
            counts = ", ".join(f"{count} {label}" for label, count in row.unexpected.items())
            flag = f" (unexpected: {counts})"
        lines.append(
            f"| {backend} | {row.scenario.label}{flag} | {row.rps:,.0f} | {row.p50_ms:.1f} | "
            f"{row.p99_ms:.1f} | {percent(row.ratio)} | "
            f"{'-' if row.statements is None else row.statements} | "
            f"{row.server_cpu:.0f}% | {row.cpu_ms:.2f} | {row.wrk_cpu:.0f}% |"
        )
    return lines


def percent(ratio: float) -> str:
    """A ratio as a percentage, with a decimal where it is small enough to need one."""
    return f"{ratio:.1%}" if ratio < 0.1 else f"{ratio:.0%}"


def machine_description() -> str:
    """Cores, CPU model, memory, Python: what RESULTS.md must say about the machine."""
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kilobytes = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kilobytes / 2**20:.0f} GiB RAM"
    return (
        f"{os.cpu_count()} cores ({model}){memory}, Python {sys.version.split()[0]}, "
        f"{Path(shutil.which('wrk') or 'wrk').name} {wrk_version()}"
    )


def code_description() -> str:
    """Which mapapi was measured: where it is imported from, and its commit."""
    import mapapi

    root = Path(mapapi.__file__).resolve().parent.parent
    git = ["git", "-C", str(root)]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            [*git, "status", "--porcelain", "--", "mapapi"], capture_output=True, text=True
        ).stdout.strip()
        return f"mapapi at {root}, commit {commit}{' with uncommitted changes' if changed else ''}"
    return f"mapapi at {root}"


def wrk_version() -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        output = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout
        return output.split()[1] if output.split() else ""
    return ""


def load_average() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def print_report(results: list[dict], options, load_before: str, code: str) -> bool:
    """The one table (every backend), then derived ratios and the targets."""
    print()
    print(
        f"mapapi benchmark: median of {options.runs} run(s), {options.duration:g} s per "
        f"scenario, wrk -t{options.wrk_threads} -c{options.connections}, waitress "
        f"{SERVER_THREADS} threads; CPU in % of one core"
    )
    print(
        f"machine: {machine_description()}; load average (1/5/15 min) before "
        f"{load_before}, after {load_average()}"
    )
    print(f"code: {code} (at the start of the run)")
    print()
    table = list(TABLE_HEADER)
    for result in results:
        table += table_rows(result["backend"], result["rows"])
    print("\n".join(table))
    all_met = True
    for result in results:
        extra, targets, runs = result["extra"], result["targets"], result["runs"]
        spreads = ", ".join(f"{run['bare'].spread:.0%}" for run in runs)
        print()
        print(
            f"{result['backend']}: bulk vs single creates: {extra['bulk_ratio']:.1f}x the "
            f"locations per second; page 1000 vs page 1: {extra['deep_page_p50']:.2f}x the p50 "
            f"latency ({extra['deep_page_p99']:.2f}x p99); spread of the bare view within each "
            f"run: {spreads}"
        )
        control = ", ".join(f"{label} {value}" for label, value in extra["control"].items())
        print(
            f"{result['backend']}: control, mapapi serve vs a second mapapi serve (the "
            f"same code, measured like the twins): {control}"
        )
        print(f"{result['backend']}: targets (issue 6, point 3):")
        for target in targets:
            all_met &= target.met
            print(
                f"  {'PASS' if target.met else 'FAIL'}  {target.name}: {target.value} "
                f"(target {target.goal})"
            )
        bare = next(row for row in result["rows"] if row.scenario.key == "bare")
        print(
            f"{result['backend']}: load generator check: on the bare view wrk used "
            f"{bare.wrk_cpu:.0f}% of a core while the server used {bare.server_cpu:.0f}% "
            f"({os.cpu_count()} cores)."
        )
    if options.show_sql:
        for result in results:
            print(f"\nSQL statements per scenario ({result['backend']}):")
            for key, counted in result["statements"].items():
                print(f"  {key}: {counted['count']}")
                for statement in counted["statements"]:
                    print(f"      {statement[:160]}")
    return all_met


