"""Prometheus metrics of a live ``mapapi serve`` and ``mapapi worker``,
scraped after known traffic and read with prometheus_client's own parser."""

import socket
import subprocess
import time
from importlib.metadata import version

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from mapapi.http.ratelimit import BUCKET_SETTINGS

from .helpers import free_port, mapapi_program, served_mapapi, wait_until
from .receiver import Receiver
from .test_settings import clean_env, refused_line, run

API = "/api/v1"
#: Retries in fractions of a second (the worker reads its instance's config.py).
QUICK_RETRIES = "\nWEBHOOKS_POLL_SECONDS = 0.05\nWEBHOOKS_RETRY_SCHEDULE = (0.2,) * 7\n"


def scrape(address: str) -> tuple[str, dict]:
    """The text of ``/metrics`` and its samples: {(name, sorted labels): value}."""
    response = requests.get(f"http://{address}/metrics", timeout=10)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return response.text, samples


def value(samples: dict, name: str, **labels) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def labelled(samples: dict, name: str, label: str) -> dict:
    """The samples of ``name`` by the value of its one label ``label``."""
    return {dict(key)[label]: found for (sample, key), found in samples.items() if sample == name}


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


def test_serve_counts_known_traffic_exactly_and_names_no_account_key_or_value(tmp_path, receiver):
    metrics = f"127.0.0.1:{free_port()}"
    started = time.time()
    with served_mapapi(
        tmp_path,
        MAPAPI_METRICS_ADDRESS=metrics,
        MAPAPI_RATELIMIT_MAP_CREATE="2 per hour",
        MAPAPI_WEBHOOKS_DELIVER="0",
        MAPAPI_WEBHOOKS_ALLOW_PRIVATE="1",
    ) as (server, key):
        auth = {"Authorization": f"Bearer {key}"}

        def call(method, path, status, **kwargs):
            response = requests.request(method, server.base + path, timeout=10, **kwargs)
            assert response.status_code == status, response.text
            return response

        _text, before = scrape(metrics)  # the readiness probes' /healthz are counted apart
        health = value(
            before, "mapapi_http_requests_total", route="/healthz", method="GET", status="200"
        )
        for _ in range(3):
            call("GET", API + "/maps", 200, headers=auth)
        titles = ["Secret garden", "Hidden cellar"]
        maps = [
            call("POST", API + "/maps", 201, headers=auth, json={"title": t}).json() for t in titles
        ]
        call("POST", API + "/maps", 429, headers=auth, json={"title": "One too many"})
        map_id = maps[0]["data"]["id"]
        for _ in range(2):
            call("GET", f"{API}/maps/{map_id}", 200, headers=auth)
        call("GET", f"{API}/maps/NoSuchMapIdAtAllHere00", 404, headers=auth)
        # /mcp: a tool call (answered in front of Flask, its API request a GET
        # of the map) and a handshake (answered by the view) count as requests.
        mcp = {**auth, "Accept": "application/json, text/event-stream"}
        for message in (
            {"method": "tools/call", "params": {"name": "get_map", "arguments": {"mapId": map_id}}},
            {"method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                                "clientInfo": {"name": "t", "version": "1"}}},
        ):  # fmt: skip
            answer = call("POST", "/mcp", 200, headers=mcp, json={"jsonrpc": "2.0", "id": 1, **message})
            assert "error" not in answer.json() and not answer.json()["result"].get("isError")
        call("GET", API + "/maps", 401)
        call("GET", "/no/such/page", 404)
        call("GET", "/metrics", 404)  # the API's port serves no metrics
        hook = call(
            "POST",
            API + "/webhooks",
            201,
            headers=auth,
            json={"url": receiver.url, "events": ["*"]},
        ).json()["data"]
        call("POST", f"{API}/webhooks/{hook['id']}/ping", 202, headers=auth)
        text, samples = scrape(metrics)

    requests_by = {
        tuple(dict(key)[name] for name in ("route", "method", "status")): found
        for (sample, key), found in samples.items()
        if sample == "mapapi_http_requests_total"
    }
    assert requests_by == {
        ("/healthz", "GET", "200"): health,
        ("/api/v1/maps", "GET", "200"): 3,
        ("/api/v1/maps", "POST", "201"): 2,
        ("/api/v1/maps", "POST", "429"): 1,
        ("/api/v1/maps", "GET", "401"): 1,
        ("/api/v1/maps/<map_id>", "GET", "200"): 3,
        ("/mcp", "POST", "200"): 2,
        ("/api/v1/maps/<map_id>", "GET", "404"): 1,
        ("unmatched", "GET", "404"): 2,
        ("/api/v1/webhooks", "POST", "201"): 1,
        ("/api/v1/webhooks/<webhook_id>/ping", "POST", "202"): 1,
    }
    duration = "mapapi_http_request_duration_seconds"
    assert value(samples, duration + "_count", route="/api/v1/maps", method="GET") == 4
    assert value(samples, duration + "_count", route="/api/v1/maps", method="POST") == 3
    buckets = [found for (name, key), found in samples.items()
               if name == duration + "_bucket" and dict(key)["route"] == "/api/v1/maps"
               and dict(key)["method"] == "GET"]  # fmt: skip
    assert buckets == sorted(buckets) and buckets[-1] == 4
    assert 0 < value(samples, duration + "_sum", route="/api/v1/maps", method="GET") < 60
    assert labelled(samples, "mapapi_rate_limited_requests_total", "bucket") == {
        **dict.fromkeys(BUCKET_SETTINGS, 0), "map-create": 1,
    }  # fmt: skip
    assert labelled(samples, "mapapi_events_recorded_total", "type") == {
        "map.created": 2, "ping": 1,
    }  # fmt: skip
    assert value(samples, "mapapi_webhook_attempts_due") == 1
    assert 0 <= value(samples, "mapapi_webhook_oldest_due_age_seconds") < 60
    assert value(samples, "mapapi_database_connections_in_use") == 0
    assert value(samples, "mapapi_build_info", version=version("mapapi")) == 1
    assert started - 5 < value(samples, "process_start_time_seconds") < time.time()
    account = maps[0]["data"]["userId"]
    private = [key, key[:12], account, map_id, maps[1]["data"]["id"], *titles, hook["id"],
               hook["secret"], receiver.url]  # fmt: skip
    for word in private:
        assert word not in text, word


def test_worker_counts_its_attempts_by_outcome(tmp_path, receiver):
    receiver.script.append(500)  # the first attempt fails; its retry succeeds
    metrics = f"127.0.0.1:{free_port()}"
    with served_mapapi(
        tmp_path, MAPAPI_WEBHOOKS_DELIVER="0", MAPAPI_WEBHOOKS_ALLOW_PRIVATE="1"
    ) as (
        server,
        key,
    ):
        auth = {"Authorization": f"Bearer {key}"}
        made = requests.post(
            server.base + API + "/webhooks", headers=auth, timeout=10,
            json={"url": receiver.url, "events": ["map.created"]},
        )  # fmt: skip
        assert made.status_code == 201, made.text
        for number in range(3):
            created = requests.post(
                server.base + API + "/maps", headers=auth, json={"title": f"m{number}"}, timeout=10
            )
            assert created.status_code == 201, created.text
        (tmp_path / "instance").mkdir(exist_ok=True)
        with open(tmp_path / "instance" / "config.py", "a") as config:
            config.write(QUICK_RETRIES)
        env = {**server.env, "MAPAPI_METRICS_ADDRESS": metrics}
        with open(tmp_path / "worker.err", "wb") as err:
            worker = subprocess.Popen(
                [mapapi_program(), "worker"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                stderr=err,
            )  # fmt: skip
        try:
            assert receiver.wait_for(lambda received: len(received) == 4, 60)

            def attempts():
                return labelled(scrape(metrics)[1], "mapapi_webhook_attempts_total", "outcome")

            expected = {"succeeded": 3, "failed_status": 1, "failed_connection": 0}
            assert wait_until(lambda: attempts() == expected, 30), attempts()
            text, samples = scrape(metrics)
        finally:
            worker.terminate()
            assert worker.wait(timeout=20) == 0
    assert value(samples, "mapapi_webhook_attempts_due") == 0
    assert value(samples, "mapapi_webhook_oldest_due_age_seconds") == 0
    assert "mapapi_http_requests_total{" not in text  # a worker answers no requests
    assert value(samples, "mapapi_build_info", version=version("mapapi")) == 1
    assert value(samples, "process_start_time_seconds") > 0
    assert key not in text and receiver.url not in text
    log = (tmp_path / "worker.err").read_text()
    assert f"metrics on http://{metrics}/metrics" in log, log


@pytest.mark.parametrize("command", [["serve"], ["worker"]])
def test_a_taken_metrics_address_is_one_line_and_exit_2(tmp_path, command):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        env = clean_env(tmp_path, MAPAPI_METRICS_ADDRESS=address)
        line = refused_line(run(tmp_path, env, *command))
    assert "MAPAPI_METRICS_ADDRESS" in line and address in line and "in use" in line, line
    assert not (tmp_path / "instance").exists()


def test_metrics_on_the_api_s_own_address_are_refused(tmp_path):
    port = free_port()
    env = clean_env(tmp_path, MAPAPI_METRICS_ADDRESS=f"127.0.0.1:{port}")
    line = refused_line(run(tmp_path, env, "serve", "--port", str(port)))
    assert "MAPAPI_METRICS_ADDRESS" in line and "the API's own address" in line, line


def test_a_metrics_host_that_is_no_address_is_one_line(tmp_path):
    env = clean_env(tmp_path, MAPAPI_METRICS_ADDRESS="no-such-host.invalid:9108")
    line = refused_line(run(tmp_path, env, "worker"))
    assert "MAPAPI_METRICS_ADDRESS" in line and "no-such-host.invalid" in line, line
