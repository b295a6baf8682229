"""The map page ``/view`` over HTTP: no key, no rate limit, its CSP, its
files from installed packages with the cache rules of /docs, the tile setting.
What it draws is checked in a real browser (test_view_browser.py)."""

import configparser
import fnmatch
import re
from pathlib import Path

import pytest

from mapapi import create_app
from mapapi.config import SettingError

from .factories import API

ROOT = Path(__file__).resolve().parent.parent
VIEW_PACKAGE = ROOT / "mapapi" / "view"
OSM = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"


def policy(response) -> dict[str, list[str]]:
    """The Content-Security-Policy, directive by directive."""
    directives = [part.split() for part in response.headers["Content-Security-Policy"].split(";")]
    return {words[0]: words[1:] for words in directives if words}


def page_files(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]+)"', html)


def test_the_page_needs_no_key_and_counts_in_no_rate_limit(app_config, account):
    app_config["RATELIMIT_GENERAL"] = "3 per minute"
    client = create_app(app_config).test_client()
    for _ in range(5):
        page = client.get("/view")
        assert page.status_code == 200 and page.mimetype == "text/html"
        assert not any(name.lower().startswith("x-ratelimit") for name, _value in page.headers)
        for url in page_files(page.get_data(as_text=True)):
            if not url.startswith("data:"):
                assert client.get(url).status_code == 200, url
    # Nor did any of it use the address's bucket.
    refused = client.get(f"{API}/maps")
    assert refused.status_code == 401 and refused.headers["X-RateLimit-Remaining"] == "2"


def test_the_page_allows_no_inline_script_and_only_its_own_hosts(client):
    page = client.get("/view")
    directives = policy(page)
    assert directives["default-src"] == ["'none'"]
    assert directives["script-src"] == ["'self'"]
    assert directives["style-src"] == ["'self'"]
    assert directives["connect-src"] == ["'self'"]
    assert directives["img-src"] == ["'self'", "data:", "https://tile.openstreetmap.org"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert directives["form-action"] == ["'none'"]
    assert directives["base-uri"] == ["'none'"]
    assert "unsafe" not in page.headers["Content-Security-Policy"]
    assert page.headers["X-Frame-Options"] == "DENY"


def test_the_page_has_no_inline_script_or_style_and_loads_nothing_from_elsewhere(client):
    html = client.get("/view").get_data(as_text=True)
    scripts = re.findall(r"<script\b[^>]*>", html)
    assert len(scripts) == 2 and all(' src="/view/' in tag for tag in scripts)
    assert len(re.findall(r"<script\b[^>]*></script>", html)) == 2  # nothing inside them
    assert "<style" not in html and " style=" not in html
    assert not re.search(r"\son[a-z]+=", html)  # no event handler attributes
    files = page_files(html)
    assert files == [
        "data:,",
        "/view/leaflet/leaflet.css?v=1.9.3",
        files[2],
        "/view/leaflet/leaflet.js?v=1.9.3",
        files[4],
    ]
    assert re.fullmatch(r"/view/assets/view\.css\?v=[0-9a-f]{12}", files[2])
    assert files[4] == files[2].replace("view.css", "view.js")
    assert "http://" not in html


def test_the_page_itself_is_never_cached_and_its_files_are(client):
    page = client.get("/view")
    assert page.headers["Cache-Control"] == "no-store"
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert page.headers["Referrer-Policy"] == "strict-origin-when-cross-origin"
    for url in ("/view/assets/view.js", "/view/assets/view.css", "/view/leaflet/leaflet.js",
                "/view/leaflet/leaflet.css", "/view/leaflet/images/layers.png"):  # fmt: skip
        first = client.get(url)
        assert first.status_code == 200, url
        assert first.headers["Cache-Control"] == "public, max-age=3600", url
        assert first.headers["ETag"] and first.headers["Last-Modified"], url
        assert first.headers["X-Content-Type-Options"] == "nosniff"
        again = client.get(url, headers={"If-None-Match": first.headers["ETag"]})
        assert again.status_code == 304, url
    assert client.get("/view/assets/view.js").mimetype == "text/javascript"
    assert client.get("/view/assets/view.css").mimetype == "text/css"


@pytest.mark.parametrize(
    "path",
    ["/view/assets/no-such-file.js", "/view/assets/../page.py", "/view/leaflet/../__init__.py"],
)
def test_a_file_the_page_does_not_have_is_the_json_404(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.get_json()["error"]["code"] == "NOT_FOUND"


def test_the_page_s_files_are_compressed_for_a_browser(client):
    plain = client.get("/view/leaflet/leaflet.js")
    packed = client.get("/view/leaflet/leaflet.js", headers={"Accept-Encoding": "gzip"})
    assert (
        packed.headers["Content-Encoding"] == "gzip" and "Accept-Encoding" in packed.headers["Vary"]
    )
    assert len(packed.get_data()) < len(plain.get_data()) / 2


def test_the_page_s_own_files_are_package_data():
    """An installed mapapi carries the page: setup.cfg's package_data names every file."""
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    patterns = setup["options.package_data"]["mapapi"].split()
    files = [path for path in VIEW_PACKAGE.rglob("*") if path.is_file() and path.suffix != ".pyc"]
    shipped = [path for path in files if path.suffix != ".py"]
    assert {path.name for path in shipped} == {"view.html", "view.js", "view.css"}
    for path in shipped:
        inside = path.relative_to(ROOT / "mapapi").as_posix()
        assert any(fnmatch.fnmatch(inside, pattern) for pattern in patterns), inside
    assert "xstatic-leaflet" in setup["options"]["install_requires"]


# -- MAPAPI_VIEW_TILES ------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting, source, attribution",
    [
        (OSM, "https://tile.openstreetmap.org", "OpenStreetMap contributors"),
        ("https://{s}.tile.openstreetmap.org/{z}/{x}/{y}.png", "https://*.tile.openstreetmap.org",
         "OpenStreetMap contributors"),
        ("http://127.0.0.1:8001/tiles/{z}/{x}/{-y}{r}.png?style=a&key=b", "http://127.0.0.1:8001",
         "127.0.0.1"),
        ("https://{s}.tiles.example.com/{z}/{x}/{y}.png", "https://*.tiles.example.com", "tiles.example.com"),
    ],
)  # fmt: skip
def test_the_tile_host_is_the_one_image_source_beside_the_page(
    app_config, setting, source, attribution
):
    app_config["VIEW_TILES"] = setting
    page = create_app(app_config).test_client().get("/view")
    assert policy(page)["img-src"] == ["'self'", "data:", source]
    html = page.get_data(as_text=True)
    assert f'data-tiles="{setting.replace("&", "&amp;")}"' in html
    assert f'data-attribution="{attribution}"' in html


def test_no_tiles_is_a_plain_background_and_no_other_image_host(app_config):
    app_config["VIEW_TILES"] = "NONE"
    app = create_app(app_config)
    assert app.config["VIEW_TILES"] == "none"
    page = app.test_client().get("/view")
    assert policy(page)["img-src"] == ["'self'", "data:"]
    assert 'data-tiles=""' in page.get_data(as_text=True)


def test_the_default_tiles_are_openstreetmap_s(app):
    assert app.config["VIEW_TILES"] == OSM


@pytest.mark.parametrize(
    "value",
    [
        "ftp://tiles.example.com/{z}/{x}/{y}.png",
        "https://tiles.example.com/{z}/{x}.png",
        "https://tiles.example.com/{z}/{x}/{y}.png # osm",
        "https://tiles.example.com/{z}/{x}/{y}/{style}.png",
        "https://a{s}.tiles.example.com/{z}/{x}/{y}.png",
        "https://tiles.example.com'; script-src *;/{z}/{x}/{y}.png",
        'https://tiles.example.com/{z}/{x}/{y}.png"><script>',
        "tiles.example.com/{z}/{x}/{y}.png",
        "off",
    ],
)
def test_a_tile_setting_that_is_no_template_is_refused(app_config, value):
    app_config["VIEW_TILES"] = value
    with pytest.raises(
        SettingError, match=r"^VIEW_TILES=.* is not accepted: it takes none, or an http"
    ):
        create_app(app_config)
