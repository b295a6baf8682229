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

With ``--clustered 1000000`` the map is one of that many locations, seeded
in one statement (``tests/seeding.py``: cities and noise), and drawn by
clusters in a 1920 x 1080 window; each run reads the **first picture** (the
navigation's start to ``mapapi-view-drawn``: the first viewport's clusters
on screen), then times **pans** (a drag of 1000 pixels, past the room the
page reads around the view) and **zooms** (the keyboard's + and -), each
from the input to the next ``mapapi-view-redrawn`` mark, and a layer
switch. ``--screenshot docs/view.png`` saves the first run's picture.
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
    deadline = time.monotonic() + 120  # a busy shared machine starts it slowly
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


def opened(context, base: str, key: str, map_id: str):
    """A page of ``context`` with the key, showing map ``map_id``: the page,
    the errors it raises, and when it drew the map (ms from navigation)."""
    context.add_init_script(f"sessionStorage.setItem({json.dumps(KEY_ITEM)}, {json.dumps(key)})")
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{base}/view#map={map_id}")
    page.wait_for_function(DRAWN, timeout=60_000)
    drawn = page.evaluate("() => performance.getEntriesByName('mapapi-view-drawn')[0].startTime")
    return page, errors, drawn


def measure(browser, base: str, key: str, map_id: str, layer_id: str, count: int) -> dict:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script(WATCH_LONG_TASKS)
    page, errors, drawn = opened(context, base, key, map_id)
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
    parser.add_argument("--clustered", type=int, default=0, help="a map this big, drawn by clusters")
    parser.add_argument("--screenshot", type=Path, help="with --clustered: save the first picture here")
    options = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit("Debian's chromium is needed: apt-get install chromium")
    if options.clustered:
        clustered_main(options)
        return
    runs = seeded_runs(
        options.runs,
        options.locations,
        lambda base, key, _folder, count: seed(base, key, count),
        lambda browser, base, key, map_id, layer_id, _n: measure(
            browser, base, key, map_id, layer_id, options.locations
        ),
    )
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


def seeded_runs(runs: int, count: int, seeder, measure_run) -> list[dict]:
    """``mapapi serve`` on a scratch folder, a map of ``count`` locations made
    by ``seeder(base, key, folder, count)`` (its id and a layer's), then
    ``runs`` runs of ``measure_run(browser, base, key, map_id, layer_id, n)``."""
    folder = Path(tempfile.mkdtemp(prefix="mapapi-view-bench-"))
    process = None
    try:
        process, base, key = start_server(folder)
        started = time.monotonic()
        map_id, layer_id = seeder(base, key, folder, count)
        print(f"seeded {count:,} locations in {time.monotonic() - started:.1f} s")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
            )
            measured = [measure_run(browser, base, key, map_id, layer_id, n) for n in range(runs)]
            browser.close()
        return measured
    finally:
        if process is not None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


REDRAWS = "() => performance.getEntriesByName('mapapi-view-redrawn').length"
BIG_WINDOW = {"width": 1920, "height": 1080}


def seed_clustered(base: str, key: str, folder: Path, count: int) -> tuple[str, str]:
    """A map of ``count`` locations seeded in one statement, and a layer of a
    hundred of them (made over the API); the map's and the layer's ids."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from sqlalchemy import create_engine

    from tests.seeding import seed_spread

    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    api = f"{base}/api/v1"
    map_id = session.post(f"{api}/maps", json={"title": f"{count:,} places"}).json()["data"]["id"]
    (database,) = (folder / "instance").glob("*.sqlite3")
    engine = create_engine(f"sqlite:///{database}")
    with engine.begin() as connection:
        seed_spread(connection, map_id, count, counted_after=True)
    engine.dispose()
    layer = session.post(f"{api}/maps/{map_id}/layers", json={"name": "Chosen", "color": "#E11D48"})
    layer_id = layer.json()["data"]["id"]
    items = [{"name": f"Chosen {n}", "lat": 48.85 + n / 1000, "lng": 2.35, "layerIds": [layer_id]} for n in range(100)]
    session.post(f"{api}/maps/{map_id}/locations/bulk", json={"locations": items}).raise_for_status()
    return map_id, layer_id


def until_redrawn(page, act) -> float:
    """Milliseconds from ``act()`` to the page's next redraw."""
    before = page.evaluate(REDRAWS)
    started = time.monotonic()
    act()
    page.wait_for_function(f"() => ({REDRAWS})() > {before}", timeout=30_000)
    return (time.monotonic() - started) * 1000


def measure_clustered(browser, base: str, key: str, map_id: str, layer_id: str, screenshot) -> dict:
    context = browser.new_context(viewport=BIG_WINDOW)
    page, errors, drawn = opened(context, base, key, map_id)
    discs = page.locator(".cluster").count()
    if screenshot:
        page.screenshot(path=str(screenshot))
    center = {"x": BIG_WINDOW["width"] / 2, "y": BIG_WINDOW["height"] / 2}
    page.focus("#map")  # the keyboard's + and - zoom the map

    def drag(dx: int, dy: int):
        def act():
            page.mouse.move(center["x"], center["y"])
            page.mouse.down()
            page.mouse.move(center["x"] + dx, center["y"] + dy, steps=5)
            page.mouse.up()

        return act

    moves = []
    for key_name in ("Equal", "Equal", "Equal", "Equal"):
        moves.append(("zoom", until_redrawn(page, lambda: page.keyboard.press(key_name))))
        moves.append(("pan", until_redrawn(page, drag(-1000, 0))))
    moves.append(("zoom", until_redrawn(page, lambda: page.keyboard.press("Minus"))))
    moves.append(("pan", until_redrawn(page, drag(0, 700))))
    toggle = f'#layer-list input[data-layer-id="{layer_id}"]'
    switch = until_redrawn(page, lambda: page.click(toggle))
    reads = page.evaluate(
        """() => performance.getEntriesByType("resource")
              .filter((entry) => entry.name.includes("/locations/clusters?"))
              .map((entry) => entry.responseEnd - entry.startTime)"""
    )
    context.close()
    if errors or not discs:
        raise SystemExit(f"the page drew {discs} clusters; errors: {errors}")
    pans = [ms for kind, ms in moves if kind == "pan"]
    zooms = [ms for kind, ms in moves if kind == "zoom"]
    return {
        "drawn_ms": drawn,
        "discs": discs,
        "pan_median_ms": statistics.median(pans),
        "pan_max_ms": max(pans),
        "zoom_median_ms": statistics.median(zooms),
        "zoom_max_ms": max(zooms),
        "switch_ms": switch,
        "read_median_ms": statistics.median(reads),
        "reads": len(reads),
    }


def clustered_main(options) -> None:
    runs = seeded_runs(
        options.runs,
        options.clustered,
        seed_clustered,
        lambda browser, base, key, map_id, layer_id, n: measure_clustered(
            browser, base, key, map_id, layer_id, options.screenshot if n == 0 else None
        ),
    )
    names = list(runs[0])
    print("| run | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    medians = {name: statistics.median(run[name] for run in runs) for name in names}
    for label, run in [*enumerate(runs, 1), ("median", medians)]:
        print(f"| {label} | " + " | ".join(f"{run[name]:.0f}" for name in names) + " |")
    worst = max(run["pan_max_ms"] for run in runs), max(run["zoom_max_ms"] for run in runs)
    print(
        f"first picture: median {medians['drawn_ms']:.0f} ms (target 2000); slowest pan "
        f"{worst[0]:.0f} ms, slowest zoom {worst[1]:.0f} ms (target 1000)"
    )


if __name__ == "__main__":
    main()
