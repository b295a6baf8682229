"""``mapapi sync`` on files nested deep, and what checking the depth costs.

1. The command's peak memory (its maximum resident set, from ``wait4``) and
   wall time when it refuses a GeoJSON file whose one property nests N
   arrays, for N from 1,000 to 1,000,000 (a 2 MB file): it must stay flat,
   under 300 MB, whatever N. No service is needed: the file is refused
   before the first request.
2. On a flat 100,000-Feature file, the time of the depth walk (ijson's
   basic events) against the time of reading the Features themselves (what
   the command did before, and still does after the walk): the walk's share
   of reading the file, measured in one run.

    python benchmarks/sync_depth.py
"""

import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ijson

from mapapi.filesync.source import geojson_features

DEPTHS = (1_000, 20_000, 100_000, 1_000_000)
FEATURES = 100_000


def nested(depth: int) -> bytes:
    return (
        b'{"type": "FeatureCollection", "features": [{"type": "Feature", '
        b'"geometry": {"type": "Point", "coordinates": [1, 2]}, '
        b'"properties": {"name": "Deep", "externalId": "D1", "deep": '
        + b"[" * depth + b"]" * depth + b"}}]}\n"
    )


def peak_of_refusal(path: Path) -> tuple[float, float, str]:
    """(peak MB, seconds, the error line) of ``mapapi sync`` refusing ``path``."""
    program = Path(sys.executable).parent / "mapapi"
    env = {**os.environ, "MAPAPI_KEY": "mk_live_x", "MAPAPI_URL": "http://127.0.0.1:9"}
    env = {k: v for k, v in env.items() if not k.startswith("MAPAPI_") or k in ("MAPAPI_KEY", "MAPAPI_URL")}
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(program), "sync", str(path), "--map", "m"], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    _pid, _status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    error = process.stderr.read().decode().strip()
    return usage.ru_maxrss / 1024, seconds, error


def flat(count: int) -> bytes:
    features = [
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": [2.35 + n / 1e6, 48.85]},
         "properties": {"externalId": f"E{n}", "name": f"Place {n}", "address": f"{n} Rue",
                        "properties": {"segment": "a", "rank": n}}}
        for n in range(count)
    ]  # fmt: skip
    return json.dumps({"type": "FeatureCollection", "features": features}).encode()


def best_of(runs: int, function) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    print("| nesting | file | peak memory | time | answer |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for depth in DEPTHS:
            path = Path(folder) / f"deep{depth}.geojson"
            path.write_bytes(nested(depth))
            peak, seconds, error = peak_of_refusal(path)
            size = path.stat().st_size / 1024
            print(f"| {depth:,} | {size:,.0f} KB | {peak:,.0f} MB | {seconds:.2f} s | `{error[:60]}…` |")
    data = flat(FEATURES)
    walk_and_read = best_of(3, lambda: sum(1 for _ in geojson_features(data)))
    read_only = best_of(3, lambda: sum(1 for _ in ijson.items(io.BytesIO(data), "features.item", use_float=True)))
    print(
        f"\n{FEATURES:,} flat Features ({len(data) / 1e6:.1f} MB): read {read_only:.2f} s, "
        f"walked for depth then read {walk_and_read:.2f} s: x{walk_and_read / read_only:.2f} "
        "(best of 3, one run)"
    )


if __name__ == "__main__":
    main()
