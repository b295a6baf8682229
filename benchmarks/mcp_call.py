"""A tool call over ``/mcp`` against the same API request over HTTP.

One ``mapapi serve`` (SQLite, or with ``--postgresql`` a scratch database
on the PostgreSQL server that ``MAPAPI_DATABASE_URL`` names; the
benchmark's threads and raised limits) answers both, in turns of
``--seconds`` each, ``--turns`` rounds, the order reversed each round:
``GET /api/v1/maps/:id`` with a key, and the ``tools/call`` of ``get_map``
for the same map, as the SDK's client sends it after its handshake
(JSON-RPC, the protocol-version header). It prints the requests/s of each
turn, the server's CPU per request (steadier than requests/s when others
share the machine) and the median of the turns' ratios; the target is at
least 0.7.

    python benchmarks/mcp_call.py [--turns 8] [--seconds 2] [--connections 8] [--postgresql]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.data import database_for  # noqa: E402
from harness.load import ensure_wrk, run_wrk, write_request_file  # noqa: E402
from harness.scenarios import Request, Scenario  # noqa: E402
from harness.servers import Processes, start_app_server  # noqa: E402
from harness.settings import API  # noqa: E402

TARGET = 0.7
PROTOCOL_VERSION = "2025-11-25"


def first_key(log_path: Path) -> str:
    """The key ``mapapi serve`` prints on its first run."""
    return next(line.strip() for line in log_path.read_text().splitlines() if line.startswith("mk_live_"))


def create_map(base_url: str, key: str) -> str:
    request = urllib.request.Request(  # noqa: S310 (our own server, over http)
        base_url + API + "/maps",
        data=json.dumps({"title": "Benchmark"}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        return json.load(answer)["data"]["id"]


def scenarios(map_id: str, key: str) -> tuple[Scenario, Scenario]:
    http = Scenario(
        key="http", label="GET /maps/:id over HTTP", server="app",
        requests=[Request("GET", f"{API}/maps/{map_id}")],
        headers={"Authorization": f"Bearer {key}"},
    )  # fmt: skip
    call = {
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "get_map", "arguments": {"mapId": map_id}},
    }  # fmt: skip
    mcp = Scenario(
        key="mcp", label="tools/call get_map over /mcp", server="app",
        requests=[Request("POST", "/mcp", json.dumps(call, separators=(",", ":")))],
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
        },
    )  # fmt: skip
    return http, mcp


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--wrk-threads", dest="wrk_threads", type=int, default=2)
    parser.add_argument(
        "--postgresql", action="store_true", help="on PostgreSQL (MAPAPI_DATABASE_URL), not SQLite"
    )
    options = parser.parse_args()
    wrk = ensure_wrk()
    processes = Processes()
    backend = "postgresql" if options.postgresql else "sqlite"
    with tempfile.TemporaryDirectory() as folder, database_for(backend, Path(folder)) as url:
        workdir = Path(folder)
        try:
            server = start_app_server(processes, url, workdir, "mcp", settings={"MAPAPI_BOOTSTRAP": "1"})
            key = first_key(server.log_path)
            pair = scenarios(create_map(server.base_url, key), key)
            files = {scenario.key: write_request_file(scenario, workdir) for scenario in pair}
            for scenario in pair:  # warm up: the bridge is made at the first /mcp request
                run_wrk(wrk, options, scenario, server, files[scenario.key], 2, processes)
            rates = {scenario.key: [] for scenario in pair}
            cpu = {scenario.key: [] for scenario in pair}
            for turn in range(options.turns):
                for scenario in pair if turn % 2 == 0 else reversed(pair):
                    measured = run_wrk(
                        wrk, options, scenario, server, files[scenario.key], options.seconds, processes
                    )
                    if measured.unexpected:
                        raise SystemExit(f"{scenario.label}: unexpected answers {measured.unexpected}")
                    rates[scenario.key].append(measured.rps)
                    cpu[scenario.key].append(measured.cpu_ms_per_request)
        finally:
            processes.stop_all()
    ratios = [mcp / http for http, mcp in zip(rates["http"], rates["mcp"], strict=True)]
    for scenario in pair:
        turns = ", ".join(f"{rate:.0f}" for rate in rates[scenario.key])
        print(
            f"{scenario.label:32} median {statistics.median(rates[scenario.key]):7.0f} req/s, "
            f"{statistics.median(cpu[scenario.key]):.2f} ms of server CPU a request  ({turns})"
        )
    ratio = statistics.median(ratios)
    print(f"tools/call over /mcp / the same request over HTTP: median of turn ratios {ratio:.2f}")
    print(f"target at least {TARGET}: {'met' if ratio >= TARGET else 'MISSED'}")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
