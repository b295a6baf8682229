"""How fast the map page (/view) draws a big map, and how it responds then.

Starts ``mapapi serve`` on a scratch SQLite database (``MAPAPI_VIEW_TILES=none``,
limits raised so that they never bind), seeds one map of ``--locations``
locations over the API (bulks of 100, on three layers, a third with a
category and tags), then opens ``/view#map=<id>`` ``--runs`` times, each in a
fresh context of headless Chromium (Debian's, driven by Playwright), and
reads from the page's own clock:

- **drawn**: from the navigation's start to the markers on screen (the
  performance mark ``mapapi-view-drawn``, set in the animation frame after
  the markers were added, so after the renderer drew them): the HTML,
  Leaflet, the seven requests of a load, the GeoJSON export of every
  location, parsing it and drawing;
- **export**: the GeoJSON request alone, from the browser's resource timing;
- **longest task**: the longest main-thread task of the load (Long Tasks
  API): how long the page could not answer a click;
- **switch**: from a click on the biggest layer's switch to the frame after
  its markers were hidden, then shown again.

    python benchmarks/view_page.py [--locations 10000] [--runs 5]

It prints one line per run and the medians; the key and every file are
removed at the end. Needs Debian's chromium (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
KEY_ITEM = "mapapi.view.key"
RAISED = "10000000 per hour"
DRAWN = "() => performance.getEntriesByName('mapapi-view-drawn').length > 0"
#: Runs in the page before its own script: the longest main-thread task.
WATCH_LONG_TASKS = """
window.benchLongestTask = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    window.benchLongestTask = Math.max(window.benchLongestTask, entry.duration);
  }
}).observe({type: "longtask", buffered: true});
"""
TOGGLE = """async (layerId) => {
  const toggle = document.querySelector(`#layer-list input[data-layer-id="${layerId}"]`);
  const frame = () => new Promise((done) => requestAnimationFrame(() => setTimeout(done)));
  const times = [];
  for (let turn = 0; turn < 2; turn += 1) {
    const started = performance.now();
    toggle.click();
    await frame();
    times.push(performance.now() - started);
  }
  return times;
}"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(folder: Path) -> tuple[subprocess.Popen, str, str]:
    """``mapapi serve`` on a scratch SQLite file; its process, base URL and the bootstrap key."""
    port = free_port()
    env = {name: value for name, value in os.environ.items() if not name.startswith("MAPAPI_")}
    env.update(
        MAPAPI_INSTANCE_PATH=str(folder / "instance"),
        MAPAPI_VIEW_TILES="none",
        MAPAPI_RATELIMIT_GENERAL=RAISED,
        MAPAPI_RATELIMIT_BULK=RAISED,
        MAPAPI_WEBHOOKS_DELIVER="0",
    )
    out = folder / "serve.out"
    command = [str(Path(sys.executable).parent / "mapapi"), "serve", "--port", str(port)]
    with open(out, "wb") as stdout, open(folder / "serve.err", "wb") as stderr:
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=stdout, stderr=stderr)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        lines = out.read_text().split()
        if lines and lines[-1].startswith("mk_live_"):
            try:
                if requests.get(f"{base}/healthz", timeout=1).status_code == 200:
                    return process, base, lines[-1]
            except requests.RequestException:
                pass
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"mapapi serve did not start: {(folder / 'serve.err').read_text()[-2000:]}")


def seed(base: str, key: str, count: int) -> tuple[str, str]:
    """A map of ``count`` locations; its id and the id of its biggest layer."""
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    api = f"{base}/api/v1"

    def created(path: str, body: dict) -> dict:
        response = session.post(api + path, json=body, timeout=60)
        response.raise_for_status()
        return response.json()["data"]

    map_id = created("/maps", {"title": f"{count:,} locations"})["id"]
    layers = [created(f"/maps/{map_id}/layers", {"name": name, "color": color})["id"]
              for name, color in [("North", "#E11D48"), ("South", "#16A34A"), ("Museums", "#7C3AED")]]  # fmt: skip
    category = created(f"/maps/{map_id}/categories", {"name": "Food", "color": "#F59E0B"})["id"]
    tags = [
        created(f"/maps/{map_id}/tags", {"name": name})["id"] for name in ("wifi", "quiet", "late")
    ]
    chance = random.Random(10_000)
    for start in range(0, count, 100):
        batch = []
        for index in range(start, min(count, start + 100)):
            spot = {
                "name": f"Place {index}",
                "lat": chance.uniform(48.0, 49.6),
                "lng": chance.uniform(1.5, 3.5),
                "description": "A place to see, with a description of a sentence or two.",
                "address": f"{index} Rue de la République",
                "layerIds": [layers[index % 3]] if index % 3 else [layers[0], layers[1]],
            }
            if index % 3 == 1:
                spot["categoryId"] = category
                spot["tagIds"] = tags[: 1 + index % 3]
            batch.append(spot)
        created(f"/maps/{map_id}/locations/bulk", {"locations": batch})
    return map_id, layers[0]


def measure(browser, base: str, key: str, map_id: str, layer_id: str, count: int) -> dict:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script(f"sessionStorage.setItem({json.dumps(KEY_ITEM)}, {json.dumps(key)})")
    context.add_init_script(WATCH_LONG_TASKS)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{base}/view#map={map_id}")
    page.wait_for_function(DRAWN, timeout=60_000)
    drawn = page.evaluate("() => performance.getEntriesByName('mapapi-view-drawn')[0].startTime")
    export = page.evaluate(
        """() => performance.getEntriesByType("resource")
              .filter((entry) => entry.name.endsWith("/locations.geojson"))
              .map((entry) => [entry.responseEnd - entry.startTime, entry.encodedBodySize])[0]"""
    )
    shown = int(page.get_attribute("#count", "data-shown"))
    longest = page.evaluate("() => window.benchLongestTask")
    switch_off, switch_on = page.evaluate(TOGGLE, layer_id)
    context.close()
    if errors or shown != count:
        raise SystemExit(f"the page showed {shown} of {count} locations; errors: {errors}")
    return {
        "drawn_ms": drawn,
        "export_ms": export[0],
        "export_bytes": export[1],
        "longest_task_ms": longest,
        "switch_off_ms": switch_off,
        "switch_on_ms": switch_on,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locations", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit("Debian's chromium is needed: apt-get install chromium")
    folder = Path(tempfile.mkdtemp(prefix="mapapi-view-bench-"))
    process = None
    try:
        process, base, key = start_server(folder)
        started = time.monotonic()
        map_id, layer_id = seed(base, key, options.locations)
        print(f"seeded {options.locations:,} locations in {time.monotonic() - started:.1f} s")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
            )
            runs = [
                measure(browser, base, key, map_id, layer_id, options.locations)
                for _ in range(options.runs)
            ]
            browser.close()
        print(
            "| run | drawn ms | export ms | export KB (gzip) | longest task ms | switch off ms | switch on ms |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        rows = [*enumerate(runs, 1)]
        medians = {name: statistics.median(run[name] for run in runs) for name in runs[0]}
        for label, run in [*rows, ("median", medians)]:
            print(
                f"| {label} | {run['drawn_ms']:.0f} | {run['export_ms']:.0f} | {run['export_bytes'] / 1024:.0f} "
                f"| {run['longest_task_ms']:.0f} | {run['switch_off_ms']:.0f} | {run['switch_on_ms']:.0f} |"
            )
    finally:
        if process is not None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
