"""Webhook endpoints: the resource, its rules, ping and the delivery log."""

import base64
import socket
import threading

import pytest
from sqlalchemy import select

from mapapi.delivery.addresses import is_forbidden
from mapapi.extensions import db
from mapapi.storage.models import Webhook, WebhookDelivery

from .factories import create_key, error_code, make_map
from .helpers import TIMESTAMP, data_of, validation_details

FIELDS = {
    "id", "url", "events", "mapId", "description", "enabled", "disabledReason", "createdAt",
    "updatedAt",
}  # fmt: skip
PUBLIC_URL = "https://93.184.215.14/hooks/mapapi"

#: IPv6 addresses, and whether the address rule refuses them.
IPV6_ADDRESSES = {
    "fec0::1": True,  # site-local (deprecated, but routed inside some networks)
    "feff:ffff::1": True,  # the end of fec0::/10
    "2002:7f00:1::": True,  # 6to4 of 127.0.0.1
    "2002:a00:1::1": True,  # 6to4 of 10.0.0.1
    "2002:c0a8:101::": True,  # 6to4 of 192.168.1.1
    "2002:a9fe:a9fe::": True,  # 6to4 of 169.254.169.254 (cloud metadata)
    "2002::": True,  # 6to4 of 0.0.0.0
    "64:ff9b::7f00:1": True,  # NAT64 of 127.0.0.1
    "64:ff9b::a9fe:a9fe": True,  # NAT64 of 169.254.169.254
    "64:ff9b::c0a8:101": True,  # NAT64 of 192.168.1.1
    "64:ff9b:1::a00:1": True,  # NAT64's local-use prefix
    "2001:0:4136:e378:8000:63bf:3fff:fdd2": True,  # Teredo
    "2001::5db8:d70e": True,  # Teredo, whatever it embeds
    "::7f00:1": True,  # IPv4-compatible (deprecated) 127.0.0.1
    "2002:5db8:d70e::1": False,  # 6to4 of 93.184.215.14, public
    "64:ff9b::5db8:d70e": False,  # NAT64 of 93.184.215.14, public
    "2606:4700:4700::1111": False,  # a public IPv6 address
}


@pytest.fixture
def app_config(app_config):
    app_config["WEBHOOKS_DELIVER"] = "0"
    return app_config


def create(api, **fields):
    body = {"url": PUBLIC_URL, "events": ["*"], **fields}
    return data_of(api.post("/webhooks", json=body), 201)


def test_create_returns_the_endpoint_and_its_secret_once(api):
    created = create(api, events=["location.*", "map.deleted"], description="  sync  ")
    assert set(created) == FIELDS | {"secret"}
    assert created["url"] == PUBLIC_URL
    assert created["events"] == ["location.*", "map.deleted"]
    assert created["mapId"] is None and created["enabled"] is True
    assert created["description"] == "sync"
    assert created["createdAt"] == created["updatedAt"] and TIMESTAMP.match(created["createdAt"])
    assert created["secret"].startswith("whsec_")
    assert len(base64.b64decode(created["secret"].removeprefix("whsec_"), validate=True)) == 32
    shown = data_of(api.get(f"/webhooks/{created['id']}"))
    assert set(shown) == FIELDS
    listed = data_of(api.get("/webhooks"))
    assert [item["id"] for item in listed["webhooks"]] == [created["id"]]
    assert "secret" not in listed["webhooks"][0]
    assert listed["pagination"] == {"total": 1, "page": 1, "pageSize": 50, "totalPages": 1}


def test_secrets_differ_between_endpoints(api):
    assert create(api)["secret"] != create(api)["secret"]


@pytest.mark.parametrize(
    "url",
    [
        "ftp://93.184.215.14/",
        "https://user:pass@93.184.215.14/",
        "https://user@93.184.215.14/",
        "https:///path-only",
        "not a url",
        "https://93.184.215.14/" + "a" * 2000,
        "",
        "   ",
        "https://93.184.215.14:99999/",
    ],
)
def test_bad_urls_are_refused(api, url):
    assert "url" in validation_details(api.post("/webhooks", json={"url": url, "events": ["*"]}))


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://LOCALHOST:9/hook",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:10.1.2.3]/",
        "http://10.0.0.5/",
        "http://172.16.3.4/",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data",
        "http://[fe80::1]/",
        "http://224.0.0.251/",
        "http://240.0.0.1/",
        "http://0.0.0.0/",
        "http://[::]/",
        "http://100.64.0.1/",
        "http://[fc00::1]/",
        *(f"http://[{address}]/" for address, forbidden in IPV6_ADDRESSES.items() if forbidden),
    ],
)
def test_urls_inside_the_network_are_refused(api, url):
    details = validation_details(api.post("/webhooks", json={"url": url, "events": ["*"]}))
    assert list(details) == ["url"]


@pytest.mark.parametrize("address, forbidden", IPV6_ADDRESSES.items())
def test_the_address_rule_judges_ipv6_and_the_ipv4_it_carries(address, forbidden):
    assert is_forbidden(address) is forbidden


def test_a_public_address_carried_by_6to4_or_nat64_is_accepted(api):
    for address, forbidden in IPV6_ADDRESSES.items():
        if not forbidden:
            assert create(api, url=f"https://[{address}]/in")["url"] == f"https://[{address}]/in"


def test_a_name_that_resolves_to_loopback_is_refused(api):
    name = socket.gethostname()
    assert socket.gethostbyname("localhost") == "127.0.0.1"
    details = validation_details(
        api.post("/webhooks", json={"url": "http://localhost:8000/x", "events": ["*"]})
    )
    assert "url" in details
    if socket.gethostbyname(name).startswith("127."):
        assert "url" in validation_details(
            api.post("/webhooks", json={"url": f"http://{name}/x", "events": ["*"]})
        )


def test_private_urls_are_accepted_when_allowed(app, api):
    app.config["WEBHOOKS_ALLOW_PRIVATE"] = True
    assert create(api, url="http://localhost:9/hook")["url"] == "http://localhost:9/hook"


def test_update_checks_the_url_too(api):
    created = create(api)
    response = api.put(f"/webhooks/{created['id']}", json={"url": "http://127.0.0.1/"})
    assert list(validation_details(response)) == ["url"]
    assert data_of(api.get(f"/webhooks/{created['id']}"))["url"] == PUBLIC_URL


@pytest.mark.parametrize(
    "events",
    [[], ["*"] * 21, ["location.moved"], ["ping"], ["location.*.x"], [" map.created"], "*",
     [1], None, ["Map.created"]],
)  # fmt: skip
def test_bad_event_lists_are_refused(api, events):
    details = validation_details(api.post("/webhooks", json={"url": PUBLIC_URL, "events": events}))
    assert "events" in details


def test_every_kind_of_event_selector_is_accepted(api):
    events = ["map.created", "location.updated", "tag.deleted", "layer.*", "category.*", "*"]
    assert create(api, events=events)["events"] == events


def test_map_must_be_one_of_the_account(api, other_api):
    mine = make_map(api)
    theirs = make_map(other_api)
    assert create(api, mapId=mine["id"])["mapId"] == mine["id"]
    for map_id in (theirs["id"], "nope", 5):
        response = api.post("/webhooks", json={"url": PUBLIC_URL, "events": ["*"], "mapId": map_id})
        assert "mapId" in validation_details(response)


def test_required_fields_unknown_fields_and_types(api):
    assert set(validation_details(api.post("/webhooks", json={}))) == {"url", "events"}
    details = validation_details(
        api.post("/webhooks", json={"url": PUBLIC_URL, "events": ["*"], "secret": "whsec_x"})
    )
    assert list(details) == ["secret"]
    details = validation_details(
        api.post(
            "/webhooks",
            json={"url": PUBLIC_URL, "events": ["*"], "enabled": "yes", "description": "x" * 501},
        )
    )
    assert set(details) == {"enabled", "description"}


def test_update_is_partial_and_moves_updated_at_only_on_change(api):
    created = create(api)
    same = data_of(api.put(f"/webhooks/{created['id']}", json={}))
    assert same["updatedAt"] == created["updatedAt"]
    same = data_of(api.put(f"/webhooks/{created['id']}", json={"events": ["*"], "enabled": True}))
    assert same["updatedAt"] == created["updatedAt"]
    changed = data_of(
        api.put(f"/webhooks/{created['id']}", json={**same, "enabled": False, "events": ["map.*"]})
    )
    assert changed["enabled"] is False and changed["events"] == ["map.*"]
    assert changed["url"] == PUBLIC_URL and "secret" not in changed
    assert changed["updatedAt"] > created["updatedAt"]


def test_delete_removes_it_and_its_deliveries(app, api):
    created = create(api)
    data_of(api.post(f"/webhooks/{created['id']}/ping"), 202)
    assert data_of(api.delete(f"/webhooks/{created['id']}")) == {
        "id": created["id"],
        "deleted": True,
    }
    assert api.get(f"/webhooks/{created['id']}").status_code == 404
    assert api.delete(f"/webhooks/{created['id']}").status_code == 404
    with app.app_context():
        assert db.session.scalars(select(WebhookDelivery)).all() == []


def test_an_eleventh_endpoint_is_a_conflict(api):
    for _ in range(10):
        create(api)
    response = api.post("/webhooks", json={"url": PUBLIC_URL, "events": ["*"]})
    assert response.status_code == 409 and error_code(response) == "CONFLICT"
    bad = api.post("/webhooks", json={"url": "ftp://x", "events": ["*"]})
    assert error_code(bad) == "VALIDATION_ERROR"  # validation answers before the conflict


def test_racing_creates_make_exactly_ten(app, live_server, key):
    import requests

    statuses = []
    barrier = threading.Barrier(16)

    def post():
        barrier.wait()
        response = requests.post(
            f"{live_server}/api/v1/webhooks",
            json={"url": PUBLIC_URL, "events": ["*"]},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        statuses.append(response.status_code)

    threads = [threading.Thread(target=post) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [201] * 10 + [409] * 6
    with app.app_context():
        assert len(db.session.scalars(select(Webhook)).all()) == 10


def test_read_only_keys_read_but_never_manage(app, api, account):
    created = create(api)
    reader = api.__class__(api.client, create_key(app, "owner@example.com", scope="READ_ONLY"))
    assert set(data_of(reader.get(f"/webhooks/{created['id']}"))) == FIELDS
    assert "secret" not in data_of(reader.get("/webhooks"))["webhooks"][0]
    data_of(reader.get(f"/webhooks/{created['id']}/deliveries"))
    for method, path in [
        ("POST", "/webhooks"),
        ("PUT", f"/webhooks/{created['id']}"),
        ("DELETE", f"/webhooks/{created['id']}"),
        ("POST", f"/webhooks/{created['id']}/ping"),
    ]:
        response = reader.request(method, path, json={})
        assert response.status_code == 403 and error_code(response) == "INSUFFICIENT_SCOPE"


def test_another_accounts_endpoint_is_not_found(api, other_api):
    created = create(api)
    for method, path in [
        ("GET", ""), ("PUT", ""), ("DELETE", ""), ("POST", "/ping"), ("GET", "/deliveries"),
    ]:  # fmt: skip
        response = other_api.request(method, f"/webhooks/{created['id']}{path}", json={})
        assert response.status_code == 404 and error_code(response) == "NOT_FOUND"
    assert api.get("/webhooks/%00bad").status_code == 404


def test_ping_is_queued_for_that_endpoint_alone_and_not_in_the_feed(api):
    first, second = create(api), create(api)
    event_id = data_of(api.post(f"/webhooks/{first['id']}/ping"), 202)["eventId"]
    assert isinstance(event_id, str) and event_id
    deliveries = data_of(api.get(f"/webhooks/{first['id']}/deliveries"))
    assert deliveries["pagination"]["total"] == 1
    [attempt] = deliveries["deliveries"]
    assert set(attempt) == {
        "id", "eventId", "eventType", "attempt", "status", "responseStatus", "error",
        "durationMs", "createdAt", "nextAttemptAt",
    }  # fmt: skip
    assert attempt["eventId"] == event_id and attempt["eventType"] == "ping"
    assert attempt["attempt"] == 1 and attempt["status"] == "pending"
    assert attempt["responseStatus"] is None and attempt["error"] is None
    assert TIMESTAMP.match(attempt["nextAttemptAt"])
    assert data_of(api.get(f"/webhooks/{second['id']}/deliveries"))["deliveries"] == []
    feed = api.get("/events")
    if feed.status_code == 200:  # the change feed, where it exists
        assert all(event["type"] != "ping" for event in data_of(feed)["events"])


def test_deliveries_are_paged_newest_first(api):
    created = create(api)
    ids = [
        data_of(api.post(f"/webhooks/{created['id']}/ping"), 202)["eventId"] for _ in range(3)
    ]
    page = data_of(api.get(f"/webhooks/{created['id']}/deliveries?pageSize=2"))
    assert [item["eventId"] for item in page["deliveries"]] == ids[::-1][:2]
    assert page["pagination"] == {"total": 3, "page": 1, "pageSize": 2, "totalPages": 2}
    assert "pageSize" in validation_details(
        api.get(f"/webhooks/{created['id']}/deliveries?pageSize=0")
    )


def test_an_unknown_endpoint_answers_404_before_its_body_is_read(api):
    response = api.put("/webhooks/AAAAAAAAAAAAAAAAAAAAAA", json={"url": "ftp://x"})
    assert response.status_code == 404 and error_code(response) == "NOT_FOUND"


def test_a_changed_url_is_saved_and_checked(api):
    created = create(api)
    moved = data_of(api.put(f"/webhooks/{created['id']}", json={"url": " https://93.184.215.15/x "}))
    assert moved["url"] == "https://93.184.215.15/x" and moved["updatedAt"] > created["updatedAt"]


def test_a_create_answers_the_etag_its_get_then_gives(api):
    response = api.post("/webhooks", json={"url": PUBLIC_URL, "events": ["*"]})
    assert response.status_code == 201 and "secret" in response.get_json()["data"]
    shown = api.get(f"/webhooks/{response.get_json()['data']['id']}")
    assert response.headers["ETag"] == shown.headers["ETag"]
    keyed = {"Idempotency-Key": "create-once"}
    first = api.post("/webhooks", json={"url": PUBLIC_URL, "events": ["*"]}, headers=keyed)
    replayed = api.post("/webhooks", json={"url": PUBLIC_URL, "events": ["*"]}, headers=keyed)
    assert replayed.headers["Idempotent-Replayed"] == "true"
    assert "secret" not in replayed.get_json()["data"]
    shown = api.get(f"/webhooks/{first.get_json()['data']['id']}")
    assert first.headers["ETag"] == replayed.headers["ETag"] == shown.headers["ETag"]
    assert replayed.get_data() == shown.get_data()


@pytest.mark.parametrize("with_url", [False, True], ids=["without url", "with url"])
def test_exactly_one_of_two_editors_with_the_same_if_match_wins(app, live_server, key, with_url):
    import requests

    headers = {"Authorization": f"Bearer {key}"}
    base = f"{live_server}/api/v1/webhooks"
    created = requests.post(
        base, json={"url": PUBLIC_URL, "events": ["*"]}, headers=headers, timeout=30
    )
    webhook_id = created.json()["data"]["id"]
    for round_number in range(30):
        etag = requests.get(f"{base}/{webhook_id}", headers=headers, timeout=30).headers["ETag"]
        barrier = threading.Barrier(2)
        statuses = {}

        def edit(editor):
            body = {"description": f"{round_number}-{editor}"}
            if with_url:  # a public address: the name lookup's path, without the network
                body["url"] = f"https://93.184.215.{10 + editor}/r{round_number}"
            barrier.wait()
            response = requests.put(
                f"{base}/{webhook_id}", json=body, headers={**headers, "If-Match": etag}, timeout=30
            )
            statuses[editor] = response.status_code

        editors = [threading.Thread(target=edit, args=(editor,)) for editor in (0, 1)]
        for editor in editors:
            editor.start()
        for editor in editors:
            editor.join()
        assert sorted(statuses.values()) == [200, 412], (round_number, statuses)
        winner = next(editor for editor, status in statuses.items() if status == 200)
        shown = requests.get(f"{base}/{webhook_id}", headers=headers, timeout=30).json()["data"]
        assert shown["description"] == f"{round_number}-{winner}"
        if with_url:
            assert shown["url"] == f"https://93.184.215.{10 + winner}/r{round_number}"
