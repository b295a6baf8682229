"""Behind reverse proxies: ``TRUSTED_PROXIES`` (``MAPAPI_TRUSTED_PROXIES``), default 0.

Requests without a key count against their client address's bucket; which
address that is depends on how many proxy hops are trusted. The test client
sets the peer address (``REMOTE_ADDR``) and headers directly; no network.
"""

import time

import pytest
from flask import request

from mapapi import create_app
from mapapi.extensions import db

from . import backends

LIMIT = 3
PROXY = "10.0.0.1"  # the peer: the nearest proxy, or a client talking directly


@pytest.fixture
def build_app(app_config, monkeypatch, tmp_path):
    """``build_app(**overrides)``: an app with a tight general limit.

    Records the client address and scheme each request was served with
    (what per-address limits and any log line see) in ``app.seen``.
    """
    monkeypatch.setenv("MAPAPI_INSTANCE_PATH", str(tmp_path / "instance"))
    apps = []

    def build(**overrides):
        settings = {**app_config, "RATELIMIT_GENERAL": f"{LIMIT} per minute", **overrides}
        if settings["RATELIMIT_STORAGE_URI"] != "memory://":
            settings["RATELIMIT_KEY_PREFIX"] = backends.unique_prefix()
        app = create_app(settings)
        with app.app_context():
            if db.engine.dialect.name == "sqlite":
                db.create_all()
            else:
                backends.empty_tables(db)
        app.seen = []

        @app.after_request
        def record(response):
            app.seen.append((request.remote_addr, request.scheme))
            return response

        apps.append(app)
        return app

    yield build
    for app in apps:
        with app.app_context():
            db.engine.dispose()


def anonymous(app, forwarded_for=None, peer=PROXY, **headers):
    """GET /maps without a key, from ``peer``, through ``X-Forwarded-For``."""
    if forwarded_for is not None:
        headers["X-Forwarded-For"] = forwarded_for
    response = app.test_client().get(
        "/api/v1/maps", headers=headers, environ_base={"REMOTE_ADDR": peer}
    )
    return response


def remaining_after(response) -> int:
    """The X-RateLimit-Remaining of a counted 401, or -1 for a 429."""
    code = response.get_json()["error"]["code"]
    assert response.headers.get("X-RateLimit-Limit") == str(LIMIT), response.headers
    reset = int(response.headers["X-RateLimit-Reset"])
    assert time.time() < reset <= time.time() + 61
    remaining = int(response.headers["X-RateLimit-Remaining"])
    if response.status_code == 429:
        assert code == "RATE_LIMIT_EXCEEDED"
        assert remaining == 0
        assert int(response.headers["Retry-After"]) >= 1
        return -1
    assert (response.status_code, code) == (401, "MISSING_API_KEY")
    assert "Retry-After" not in response.headers
    return remaining


def test_forwarded_for_is_not_trusted_by_default(build_app, monkeypatch):
    monkeypatch.delenv("MAPAPI_TRUSTED_PROXIES", raising=False)
    app = build_app()
    assert str(app.config["TRUSTED_PROXIES"]) == "0"

    counted = [
        remaining_after(anonymous(app, forwarded_for=client))
        for client in ("1.1.1.1", "2.2.2.2", "3.3.3.3, 4.4.4.4", "5.5.5.5")
    ]
    # One bucket, the peer's, whatever the header claims.
    assert counted == [2, 1, 0, -1]
    assert {address for address, _ in app.seen} == {PROXY}
    # Another peer has a bucket of its own.
    assert remaining_after(anonymous(app, forwarded_for="1.1.1.1", peer="10.0.0.2")) == 2
    assert app.seen[-1][0] == "10.0.0.2"


def test_forwarded_proto_is_not_trusted_by_default(build_app, monkeypatch):
    monkeypatch.delenv("MAPAPI_TRUSTED_PROXIES", raising=False)
    app = build_app()
    anonymous(app, forwarded_for="1.1.1.1", **{"X-Forwarded-Proto": "https"})
    assert app.seen == [(PROXY, "http")]


def test_one_trusted_proxy_gives_each_forwarded_client_its_own_bucket(build_app):
    app = build_app(TRUSTED_PROXIES=1)

    assert [remaining_after(anonymous(app, forwarded_for="1.2.3.4")) for _ in range(4)] == [
        2, 1, 0, -1,
    ]
    # Another client behind the same proxy is not refused.
    assert remaining_after(anonymous(app, forwarded_for="5.6.7.8")) == 2
    assert [address for address, _ in app.seen] == ["1.2.3.4"] * 4 + ["5.6.7.8"]


def test_a_spoofed_forwarded_for_entry_does_not_choose_the_bucket(build_app):
    app = build_app(TRUSTED_PROXIES=1)
    for _ in range(LIMIT):
        anonymous(app, forwarded_for="1.2.3.4")
    assert remaining_after(anonymous(app, forwarded_for="1.2.3.4")) == -1

    # 1.2.3.4 claims to be 6.6.6.6; the proxy appended the real address last.
    assert remaining_after(anonymous(app, forwarded_for="6.6.6.6, 1.2.3.4")) == -1
    assert remaining_after(anonymous(app, forwarded_for="6.6.6.6, 9.9.9.9, 1.2.3.4")) == -1
    assert app.seen[-2:] == [("1.2.3.4", "http")] * 2
    # Nothing was counted against the address it claimed.
    assert remaining_after(anonymous(app, forwarded_for="6.6.6.6")) == 2
    # And spoofing the same front entry does not merge other clients' buckets.
    assert remaining_after(anonymous(app, forwarded_for="6.6.6.6, 5.6.7.8")) == 2


def test_one_trusted_proxy_sets_the_scheme_and_falls_back_to_the_peer_without_header(build_app):
    app = build_app(TRUSTED_PROXIES=1)
    anonymous(app, forwarded_for="1.2.3.4", **{"X-Forwarded-Proto": "https"})
    assert app.seen[-1] == ("1.2.3.4", "https")
    # A request that did not come through the proxy (no header): the peer counts.
    assert remaining_after(anonymous(app)) == 2
    assert app.seen[-1] == (PROXY, "http")


def test_two_trusted_proxies_take_the_second_to_last_entry(build_app):
    app = build_app(TRUSTED_PROXIES=2)
    # client -> proxy 172.16.0.5 (appends the client) -> proxy PROXY (appends 172.16.0.5)
    sent = [
        "1.2.3.4, 172.16.0.5",
        "6.6.6.6, 1.2.3.4, 172.16.0.5",  # spoofed front entry
        "1.2.3.4, 172.16.0.6",           # same client through another first proxy
    ]
    assert [remaining_after(anonymous(app, forwarded_for=value)) for value in sent] == [2, 1, 0]
    assert [address for address, _ in app.seen] == ["1.2.3.4"] * 3
    assert remaining_after(anonymous(app, forwarded_for="1.2.3.4, 172.16.0.5")) == -1
    # Neither the first proxy's address nor the spoofed one was counted.
    assert remaining_after(anonymous(app, forwarded_for="172.16.0.5, 172.16.0.5")) == 2
    assert remaining_after(anonymous(app, forwarded_for="6.6.6.6, 172.16.0.5")) == 2
    assert [address for address, _ in app.seen[-2:]] == ["172.16.0.5", "6.6.6.6"]


def test_two_trusted_proxies_ignore_a_header_with_too_few_entries(build_app):
    app = build_app(TRUSTED_PROXIES=2)
    # Only one hop wrote the header: the client's own claim is not trusted.
    assert remaining_after(anonymous(app, forwarded_for="1.2.3.4")) == 2
    assert remaining_after(anonymous(app, forwarded_for="5.6.7.8")) == 1
    assert [address for address, _ in app.seen] == [PROXY, PROXY]


@pytest.mark.parametrize("hops, client", [("1", "1.2.3.4"), ("2", "6.6.6.6")])
def test_trusted_proxies_come_from_the_environment(build_app, monkeypatch, hops, client):
    monkeypatch.setenv("MAPAPI_TRUSTED_PROXIES", hops)
    app = build_app()
    assert app.config["TRUSTED_PROXIES"] == int(hops)

    assert [remaining_after(anonymous(app, forwarded_for="6.6.6.6, 1.2.3.4")) for _ in range(2)] == [
        2, 1,
    ]
    assert remaining_after(anonymous(app, forwarded_for="7.7.7.7")) == 2
    assert app.seen[0][0] == client


def test_environment_value_zero_trusts_no_proxy(build_app, monkeypatch):
    monkeypatch.setenv("MAPAPI_TRUSTED_PROXIES", "0")
    app = build_app()
    assert remaining_after(anonymous(app, forwarded_for="1.1.1.1")) == 2
    assert remaining_after(anonymous(app, forwarded_for="2.2.2.2")) == 1
    assert [address for address, _ in app.seen] == [PROXY, PROXY]
