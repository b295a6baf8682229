"""The map page in a real browser: Debian's chromium, headless, driven by
Playwright, against a live server. What it draws is counted against the API;
changes made over the API show without a reload; hostile names stay text.

The browser resolves no host but 127.0.0.1, so nothing leaves this machine;
the default tiles' requests are refused inside the browser.
"""

import json
import logging
import random
import time
from datetime import timedelta

import pytest
from sqlalchemy import update

from mapapi.extensions import db
from mapapi.storage.models import Event
from mapapi.timeutil import utcnow

from .factories import make_category, make_layer, make_location, make_map, make_tag
from .helpers import headless_chromium
from .seeding import seed_spread

pytest.importorskip("playwright.sync_api")

KEY_ITEM = "mapapi.view.key"
#: The issue's promise: a change made over the API shows within this, without a reload.
LIVE_SECONDS = 5
#: The page's pace between two reads of the feed (view.js POLL_SECONDS), and a little more.
BEYOND_ONE_POLL_SECONDS = 4.5
XSS = "<img src=x onerror=alert(1)>"
DEFAULT_COLOR = "#6B7280"
DRAWN = "() => performance.getEntriesByName('mapapi-view-drawn').length > 0"


@pytest.fixture(scope="module")
def chromium():
    """One browser for the module; it resolves no host but 127.0.0.1."""
    with headless_chromium("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1") as browser:
        yield browser


@pytest.fixture
def app_config(app_config, request):
    """No tiles unless a test says otherwise (through ``indirect`` parametrization)."""
    app_config["VIEW_TILES"] = "none"
    app_config.update(getattr(request, "param", {}))
    return app_config


class Watched:
    """A page of its own context, with what it logged, raised, asked and requested."""

    def __init__(self, browser, key: str | None = None):
        self.context = browser.new_context(viewport={"width": 1280, "height": 800})
        if key is not None:
            # What the prompt would have stored, before the page's script runs.
            self.context.add_init_script(
                f"sessionStorage.setItem({json.dumps(KEY_ITEM)}, {json.dumps(key)})"
            )
        self.page = self.context.new_page()
        self.console_errors, self.page_errors, self.dialogs, self.requests = [], [], [], []
        self.page.on(
            "console",
            lambda message: message.type == "error" and self.console_errors.append(message.text),
        )
        self.page.on("pageerror", lambda error: self.page_errors.append(str(error)))
        self.page.on("dialog", self._dialog)
        self.page.on("request", lambda request: self.requests.append(request))

    def _dialog(self, dialog):
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, url: str) -> None:
        self.page.goto(url)

    def wait_ready(self) -> None:
        self.page.wait_for_selector("body[data-state=ready]", timeout=30_000)
        self.page.wait_for_function(DRAWN, timeout=30_000)

    def count(self, which: str) -> int:
        return int(self.page.get_attribute("#count", f"data-{which}"))

    def markers(self) -> dict[str, dict]:
        """The SVG markers drawn, by location id: their fill and where they are on screen."""
        return self.page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll("path.location-marker")].map(
                (path) => [path.dataset.locationId, {fill: path.getAttribute("fill"), d: path.getAttribute("d")}]))"""
        )

    def popup_of(self, location_id: str) -> str:
        self.page.locator(f'path[data-location-id="{location_id}"]').click()
        content = self.page.locator(f'.location-popup[data-location-id="{location_id}"]')
        content.wait_for()
        text = content.inner_text()
        self.page.keyboard.press("Escape")
        content.wait_for(state="detached")
        return text

    def feed_reads(self) -> int:
        return sum("/api/v1/events?" in request.url for request in self.requests)

    def close(self) -> None:
        self.context.close()


def wait_for(watched: Watched, condition: str, seconds: float, argument=None) -> float:
    """Seconds until ``condition`` (a JS function) held in the page; fails after ``seconds``."""
    started = time.monotonic()
    watched.page.wait_for_function(condition, arg=argument, timeout=seconds * 1000)
    return time.monotonic() - started


@pytest.fixture
def walks(api):
    """A map whose every name is hostile, with two layers, a category, two tags, five locations."""
    map_id = make_map(api, title=f"Walks {XSS}")["id"]
    hedges = make_layer(api, map_id, name="<b>Hedges</b>", color="#E11D48")
    parks = make_layer(api, map_id, name="Parks", color="#16A34A")
    food = make_category(api, map_id, name="<i>Food</i>", color="#F59E0B")
    wifi = make_tag(api, map_id, name="wifi<script>alert(2)</script>")
    quiet = make_tag(api, map_id, name="quiet")
    spots = {
        "rich": make_location(api, map_id, name="Café Lumière", lat=48.85, lng=2.30,
                              description="Two rooms, <em>no</em> music.\nOpen late.",
                              address="1 Rue de Rivoli & Co", categoryId=food["id"],
                              tagIds=[wifi["id"], quiet["id"]], layerIds=[hedges["id"]],
                              properties={"seats": 40, "hours": {"mon": ["8-12", "<b>14-18</b>"]}}),
        "park": make_location(api, map_id, name="Parc Monceau", lat=48.88, lng=2.31, layerIds=[parks["id"]]),
        "food": make_location(api, map_id, name="Marché", lat=48.86, lng=2.36, categoryId=food["id"]),
        "xss": make_location(api, map_id, name=XSS, lat=48.84, lng=2.34, description=XSS,
                             address="<svg onload=alert(3)>", layerIds=[hedges["id"]]),
        "plain": make_location(api, map_id, name="Plain bench", lat=48.87, lng=2.27),
    }  # fmt: skip
    make_map(api, title="Another map")
    return {
        "map": map_id, "hedges": hedges, "parks": parks, "food": food, "wifi": wifi,
        "spots": {name: spot["id"] for name, spot in spots.items()},
    }  # fmt: skip


def test_the_page_draws_a_map_and_follows_its_changes(
    chromium, live_server, api, key, walks, caplog
):
    caplog.set_level(logging.INFO, logger="mapapi.access")
    watched = Watched(chromium)
    page, spots = watched.page, walks["spots"]
    watched.open(f"{live_server}/view")

    # The key, asked for once; kept in this tab's sessionStorage only.
    page.fill("#key-input", key)
    page.click("#key-form button[type=submit]")
    page.wait_for_function("() => document.querySelectorAll('#maps option').length === 3")
    assert page.locator("#maps option").all_inner_texts() == [
        "Choose a map…",
        f"Walks {XSS}",
        "Another map",
    ]
    page.select_option("#maps", walks["map"])
    watched.wait_ready()
    assert page.url.endswith(f"/view#map={walks['map']}")
    assert page.evaluate(f"() => sessionStorage.getItem('{KEY_ITEM}')") == key
    assert page.evaluate("() => localStorage.length") == 0
    assert watched.context.cookies() == []

    # Every location, coloured by its first layer, else its category, else the default.
    total = api.get(f"/maps/{walks['map']}/locations").get_json()["data"]["pagination"]["total"]
    assert watched.count("total") == watched.count("shown") == total == 5
    markers = watched.markers()
    assert set(markers) == set(spots.values())
    assert markers[spots["rich"]]["fill"] == "#E11D48"
    assert markers[spots["park"]]["fill"] == "#16A34A"
    assert markers[spots["food"]]["fill"] == "#F59E0B"
    assert markers[spots["plain"]]["fill"] == DEFAULT_COLOR

    # The popup: name, description, address, category and tags, by their names, as text.
    text = watched.popup_of(spots["rich"])
    for shown in ["Café Lumière", "Two rooms, <em>no</em> music.\nOpen late.", "1 Rue de Rivoli & Co",
                  "<i>Food</i>", "wifi<script>alert(2)</script>", "quiet", "<b>Hedges</b>"]:  # fmt: skip
        assert shown in text, (shown, text)
    assert walks["wifi"]["id"] not in text and walks["food"]["id"] not in text
    # Its own properties too, nested ones as indented JSON, all as text.
    assert "SEATS\n40" in text and '"mon": [\n    "8-12",\n    "<b>14-18</b>"' in text, text
    text = watched.popup_of(spots["xss"])
    assert text.count(XSS) == 2 and "<svg onload=alert(3)>" in text
    assert page.locator(".leaflet-popup-pane img, .leaflet-popup-pane svg").count() == 0
    assert page.locator("#layer-list .layer-name").all_inner_texts() == ["<b>Hedges</b>", "Parks"]

    # A layer switched off hides its markers; on again shows them.
    page.uncheck(f'#layer-list input[data-layer-id="{walks["hedges"]["id"]}"]')
    assert watched.count("shown") == 3
    assert set(watched.markers()) == {spots["park"], spots["food"], spots["plain"]}
    page.check(f'#layer-list input[data-layer-id="{walks["hedges"]["id"]}"]')
    assert watched.count("shown") == 5

    # The search box asks the API (q) and narrows the markers.
    page.fill("#search", "BENCH")
    wait_for(watched, "() => document.querySelector('#count').dataset.shown === '1'", 10)
    assert set(watched.markers()) == {spots["plain"]}
    assert any("locations.geojson?q=BENCH" in request.url for request in watched.requests)
    page.fill("#search", "")
    wait_for(watched, "() => document.querySelector('#count').dataset.shown === '5'", 10)
    assert "M0 0" not in [marker["d"] for marker in watched.markers().values()]  # all in view again

    # Changes by another client: created, moved, deleted, a tag renamed, a layer recoloured.
    before = watched.markers()
    created = make_location(api, walks["map"], name="New stall", lat=48.83, lng=2.32)
    assert (
        api.put(
            f"/maps/{walks['map']}/locations/{spots['park']}", json={"lat": 48.89, "lng": 2.35}
        ).status_code
        == 200
    )
    assert api.delete(f"/maps/{walks['map']}/locations/{spots['plain']}").status_code == 200
    assert (
        api.put(
            f"/maps/{walks['map']}/tags/{walks['wifi']['id']}", json={"name": "wi-fi"}
        ).status_code
        == 200
    )
    assert (
        api.put(
            f"/maps/{walks['map']}/layers/{walks['parks']['id']}", json={"color": "#2563EB"}
        ).status_code
        == 200
    )
    seconds = wait_for(
        watched,
        """([created, moved, deleted, before]) => {
            const path = (id) => document.querySelector(`path[data-location-id="${id}"]`);
            return path(created) && !path(deleted) && path(moved)
                && path(moved).getAttribute("d") !== before && path(moved).getAttribute("fill") === "#2563EB";
        }""",
        LIVE_SECONDS,
        [created["id"], spots["park"], spots["plain"], before[spots["park"]]["d"]],
    )
    assert seconds <= LIVE_SECONDS
    assert watched.count("total") == 5
    assert "wi-fi" in watched.popup_of(spots["rich"])
    assert page.is_visible("body[data-state=ready]")  # no reload happened
    assert sum("locations.geojson" in r.url and "q=" not in r.url for r in watched.requests) == 1

    # Nothing ran that should not have, and the key went only to the API.
    assert watched.dialogs == [] and watched.page_errors == [] and watched.console_errors == []
    for request in watched.requests:
        assert key not in request.url
        if "authorization" in request.headers:
            assert request.url.startswith(f"{live_server}/api/v1/"), request.url
            assert request.headers["authorization"] == f"Bearer {key}"
    logged = [record.getMessage() for record in caplog.records if record.name == "mapapi.access"]
    assert any('"/view"' in line for line in logged) and any(
        "/api/v1/events" in line for line in logged
    )
    assert not [line for line in logged if key in line]
    watched.close()


def test_an_expired_cursor_reloads_the_map_and_a_revoked_key_brings_the_prompt_back(
    chromium, live_server, api, key, app
):
    map_id = make_map(api, title="Short memory")["id"]
    make_location(api, map_id, name="First")
    watched = Watched(chromium, key)
    watched.open(f"{live_server}/view#map={map_id}")
    watched.wait_ready()
    assert watched.count("total") == 1

    # Every event kept so far falls out of the retention: the page's cursor is expired (410).
    with app.app_context():
        db.session.execute(update(Event).values(created_at=utcnow() - timedelta(days=60)))
        db.session.commit()
    second = make_location(api, map_id, name="Second", lat=3.0, lng=4.0)
    wait_for(
        watched, f"() => document.querySelector('path[data-location-id=\"{second['id']}\"]')", 15
    )
    assert watched.count("total") == 2
    assert sum("locations.geojson" in request.url for request in watched.requests) == 2  # reloaded

    # The key revokes itself: the page's next request is refused and it asks again.
    (own,) = [k for k in api.get("/keys").get_json()["data"]["keys"] if key.startswith(k["prefix"])]
    assert api.delete(f"/keys/{own['id']}").status_code == 200
    watched.page.wait_for_selector("#key-form", state="visible", timeout=15_000)
    assert watched.page.get_attribute("body", "data-state") == "key"
    assert watched.page.evaluate(f"() => sessionStorage.getItem('{KEY_ITEM}')") is None
    assert "refused" in watched.page.inner_text("#message")
    assert watched.page.locator("path.location-marker").count() == 0
    assert watched.page_errors == [] and watched.dialogs == []
    watched.close()


@pytest.mark.parametrize(
    "app_config", [{"RATELIMIT_GENERAL": "40 per hour"}], indirect=True, ids=["40-per-hour"]
)
def test_the_page_pauses_while_hidden_and_waits_out_a_429(chromium, live_server, api, key):
    map_id = make_map(api, title="Patience")["id"]
    make_location(api, map_id)
    watched = Watched(chromium, key)
    watched.open(f"{live_server}/view#map={map_id}")
    watched.wait_ready()

    # Hidden: no read of the feed for longer than the page's pace; shown: one at once.
    set_hidden = """(hidden) => {
        Object.defineProperty(document, "hidden", {value: hidden, configurable: true});
        document.dispatchEvent(new Event("visibilitychange"));
    }"""
    watched.page.evaluate(set_hidden, True)
    reads = watched.feed_reads()
    assert watched.page.get_attribute("#live", "data-state") == "paused"
    watched.page.wait_for_timeout(BEYOND_ONE_POLL_SECONDS * 1000)
    assert watched.feed_reads() == reads
    with watched.page.expect_request(
        lambda request: "/api/v1/events?" in request.url, timeout=2000
    ):
        watched.page.evaluate(set_hidden, False)
    wait_for(watched, "() => document.querySelector('#live').dataset.state === 'live'", 5)

    # The account's bucket runs dry (another client): the page waits for Retry-After.
    refused = api.get("/maps")
    while refused.status_code != 429:
        refused = api.get("/maps")
    wait_for(watched, "() => document.querySelector('#live').dataset.state === 'waiting'", 10)
    assert "Rate limit reached" in watched.page.inner_text("#live")
    next_check = int(watched.page.get_attribute("#live", "data-next")) / 1000
    assert next_check >= time.time() + int(refused.headers["Retry-After"]) - 60
    reads = watched.feed_reads()
    watched.page.wait_for_timeout(1000)
    assert watched.feed_reads() == reads
    assert watched.page_errors == []
    watched.close()


def seed_locations(api, map_id: str, count: int, make) -> list[str]:
    """``count`` locations from ``make(index)``, by bulks of 100; their ids in order."""
    ids = []
    for start in range(0, count, 100):
        body = {"locations": [make(index) for index in range(start, min(count, start + 100))]}
        ids += [
            spot["id"] for spot in api.created(f"/maps/{map_id}/locations/bulk", body)["created"]
        ]
    return ids


def test_a_map_of_more_than_2000_locations_is_drawn_on_a_canvas_and_opens_popups(
    chromium, live_server, api, key
):
    map_id = make_map(api, title="Crowd")["id"]
    # All on one spot: the view centres on it, so a click in the middle reaches the top marker.
    ids = seed_locations(
        api, map_id, 2001, lambda index: {"name": f"Seat {index}", "lat": 45.0, "lng": 5.0}
    )
    watched = Watched(chromium, key)
    watched.open(f"{live_server}/view#map={map_id}")
    watched.wait_ready()
    assert watched.count("total") == watched.count("shown") == 2001
    assert watched.page.locator("path.location-marker").count() == 0
    assert watched.page.locator(".leaflet-overlay-pane canvas").count() == 1
    box = watched.page.locator("#map").bounding_box()
    watched.page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    popup = watched.page.locator(".location-popup")
    popup.wait_for()
    assert popup.get_attribute("data-location-id") == ids[-1]  # drawn last, so on top
    assert watched.page.inner_text(".location-popup .name") == "Seat 2000"
    assert watched.console_errors == [] and watched.page_errors == []
    watched.close()


def test_a_map_of_1000_locations_with_a_popup_open(chromium, live_server, api, key, tmp_path):
    """A thousand markers and a popup, without tiles so that it is the same on every run.
    (The README's picture, docs/view.png, is a million locations by clusters:
    ``benchmarks/view_page.py --clustered 1000000 --screenshot docs/view.png``.)"""
    map_id = make_map(api, title="Lisbon, on foot")["id"]
    layers = [make_layer(api, map_id, name=name, color=color)["id"] for name, color in
              [("Viewpoints", "#E11D48"), ("Cafés", "#D97706"), ("Gardens", "#16A34A")]]  # fmt: skip
    museums = make_category(api, map_id, name="Museums", color="#7C3AED")["id"]
    tags = [make_tag(api, map_id, name=name)["id"] for name in ("sunset", "free")]
    chance = random.Random(35)

    def spot(index):
        place = {
            "name": f"Place {index}",
            "lat": chance.gauss(38.72, 0.025),
            "lng": chance.gauss(-9.14, 0.04),
        }
        kind = chance.random()
        if kind < 0.6:
            place["layerIds"] = [layers[int(kind * 5)]]
        elif kind < 0.8:
            place["categoryId"] = museums
        return place

    seed_locations(api, map_id, 999, spot)
    shown = make_location(api, map_id, name="Miradouro da Graça", lat=38.716, lng=-9.131,
                          description="A terrace over the old town and the river.",
                          address="Largo da Graça, Lisboa", layerIds=[layers[0]], tagIds=tags)  # fmt: skip
    watched = Watched(chromium, key)
    watched.open(f"{live_server}/view#map={map_id}")
    watched.wait_ready()
    assert watched.count("total") == watched.count("shown") == 1000
    assert len(watched.markers()) == 1000
    watched.page.locator(f'path[data-location-id="{shown["id"]}"]').click()
    watched.page.locator(".location-popup").wait_for()
    watched.page.wait_for_function(  # Leaflet fades a popup in
        "() => getComputedStyle(document.querySelector('.leaflet-popup')).opacity === '1'"
    )
    screenshot = tmp_path / "view.png"
    watched.page.screenshot(path=str(screenshot))
    assert screenshot.stat().st_size > 20_000
    assert watched.console_errors == [] and watched.page_errors == []
    watched.close()


@pytest.mark.parametrize(
    "app_config", [{"VIEW_TILES": "https://tile.openstreetmap.org/{z}/{x}/{y}.png"}],
    indirect=True, ids=["default-tiles"],
)  # fmt: skip
def test_tiles_that_do_not_load_leave_the_markers_working(chromium, live_server, api, key):
    """The default tiles (OpenStreetMap's) with their attribution; every tile refused."""
    map_id = make_map(api, title="Offline")["id"]
    spot = make_location(api, map_id, name="Still here")
    watched = Watched(chromium, key)
    tiles = []
    watched.context.route(
        "https://tile.openstreetmap.org/**",
        lambda route: (tiles.append(route.request), route.abort()),
    )
    watched.open(f"{live_server}/view#map={map_id}")
    watched.wait_ready()
    assert tiles, "the page asked for no tile"
    assert all("authorization" not in tile.headers and key not in tile.url for tile in tiles)
    assert watched.count("shown") == 1
    assert "Still here" in watched.popup_of(spot["id"])
    credit = watched.page.locator(
        ".leaflet-control-attribution a[href='https://www.openstreetmap.org/copyright']"
    )
    assert credit.inner_text() == "OpenStreetMap contributors"
    assert "© OpenStreetMap contributors" in watched.page.inner_text(".leaflet-control-attribution")
    assert watched.page_errors == []
    watched.close()


REDRAWS = "() => performance.getEntriesByName('mapapi-view-redrawn').length"


def cluster_reads(watched: Watched) -> list[str]:
    return [request.url for request in watched.requests if "/locations/clusters?" in request.url]


def test_a_map_of_100000_locations_is_drawn_by_clusters(chromium, live_server, app, api, key):
    """Above 5,000 locations: the API's clusters of the view, counted as the
    API counts them; a click zooms in; a write shows; properties in popups."""
    map_id = make_map(api, title="The world's cafés")["id"]
    with app.app_context(), db.engine.begin() as connection:
        seed_spread(connection, map_id, 100_000)
    # Alone in the Arctic: no seeded place is north of 70°.
    properties = {"height": 52, "keeper": {"name": "Ana <b>", "since": [1999, 2004]}, "lit": True}
    lighthouse = make_location(api, map_id, name="Lighthouse", lat=84.5, lng=-30.0, properties=properties)
    watched = Watched(chromium, key)
    watched.open(f"{live_server}/view#map={map_id}")
    watched.wait_ready()
    page = watched.page
    assert watched.count("total") == 100_001
    assert page.locator("path.location-marker").count() < 2000  # no marker a location

    # The discs are the API's clusters of the page's last read, labelled by count.
    (overview, first_read) = cluster_reads(watched)
    answer = api.get(first_read.split("/api/v1", 1)[1]).get_json()["data"]
    discs = page.evaluate(
        "() => [...document.querySelectorAll('.cluster')].map((n) => [Number(n.dataset.count), n.textContent])"
    )
    assert sorted(count for count, _label in discs) == sorted(c["count"] for c in answer["clusters"])
    assert all(label == str(count) for count, label in discs if count < 1000)
    assert all(label.endswith(("k", "M")) for count, label in discs if count >= 1000)
    assert watched.count("shown") == answer["total"]
    assert set(watched.markers()) == {location["id"] for location in answer["locations"]}

    # A lone location's popup shows its properties, as text.
    text = watched.popup_of(lighthouse["id"])
    for shown in ("height", "52", "keeper", '"name": "ana <b>"', "1999", "lit", "true"):
        assert shown in text.lower(), (shown, text)  # names are shown in capitals
    assert page.locator(".leaflet-popup-pane b").count() == 0

    # A click on the biggest disc zooms to its box, and the page reads that view.
    redraws = page.evaluate(REDRAWS)
    biggest = max(discs)[0]
    page.locator(f'.cluster[data-count="{biggest}"]').click()
    page.wait_for_function(f"() => ({REDRAWS})() > {redraws}", timeout=10_000)
    zoom_of = lambda url: int(url.split("zoom=")[1].split("&")[0])  # noqa: E731
    assert zoom_of(cluster_reads(watched)[-1]) > zoom_of(first_read)

    # A location written elsewhere shows within seconds (the feed, then a read).
    shown = watched.count("shown")
    last = cluster_reads(watched)[-1]
    west, south, east, north = map(float, last.split("bbox=")[1].split("&")[0].split(","))
    make_location(api, map_id, name="New", lat=(south + north) / 2, lng=(west + east) / 2)
    wait_for(watched, "(n) => Number(document.querySelector('#count').dataset.shown) === n + 1", 30, shown)
    assert watched.count("total") == 100_002

    # Feed and viewport reads pass the page's allowance, which counts them.
    feed = sum("/api/v1/events?" in r.url and "limit=" in r.url for r in watched.requests)
    assert int(page.get_attribute("body", "data-paced")) == len(cluster_reads(watched)) - 1 + feed
    assert overview.endswith("bbox=-180,-90,180,90&zoom=2")
    assert watched.console_errors == [] and watched.page_errors == []
    watched.close()


def test_a_clustered_page_keeps_to_its_allowance_while_the_view_moves(
    chromium, live_server, app, api, key
):
    """Forty moves in quick succession: at most the burst of 30 reads, then
    the page waits for its allowance instead of spending the key's bucket."""
    map_id = make_map(api, title="Busy")["id"]
    with app.app_context(), db.engine.begin() as connection:
        seed_spread(connection, map_id, 6_000)
    watched = Watched(chromium, key)
    watched.open(f"{live_server}/view#map={map_id}")
    watched.wait_ready()
    page = watched.page
    page.locator("#map").click(position={"x": 5, "y": 5})
    for step in range(40):
        page.keyboard.press("Equal" if step % 2 == 0 else "Minus")
        page.wait_for_timeout(400)
    page.wait_for_timeout(1000)
    reads = len(cluster_reads(watched)) - 1
    assert 20 <= reads <= 30 + 1, reads
    assert int(page.get_attribute("body", "data-paced")) <= 32
    watched.close()
