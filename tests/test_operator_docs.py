"""What the operator and client docs promise about addresses, metrics and
errors, checked against the code."""

import json
import re
from pathlib import Path

import pytest

from mapapi import metrics

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
DEFAULT_PORT, METRICS_PORT = 8080, 9108
#: Ports on purpose: docs/deploy.md runs four `serve` processes per host, each
#: on its own port (`mapapi@8081`...), with their metrics on 1 and that port,
#: and two workers' metrics on 19101 and 19102; a browser page's origin in
#: the CORS example of the README.
OTHER_PORTS = {
    "docs/deploy.md": {8081, 8082, 8083, 8084, 18081, 18082, 18083, 18084, 19101, 19102},
    "README.md": {3000},
}
ADDRESS = re.compile(
    r"(?:127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]|10\.0\.0\.\d+):(\d+)(?![\d%])"
    r"|--port[ =](\d+)|MAPAPI_PORT=(\d+)"
)


def test_every_port_in_the_docs_examples_is_the_default_one():
    found = {}
    for path in DOCS:
        name = path.relative_to(ROOT).as_posix()
        for match in ADDRESS.finditer(path.read_text()):
            port = int(next(group for group in match.groups() if group))
            if port not in {DEFAULT_PORT, METRICS_PORT} | OTHER_PORTS.get(name, set()):
                found.setdefault(name, []).append(match.group())
    assert found == {}


def test_the_api_guide_tells_generated_clients_their_base_url():
    guide = (ROOT / "docs" / "api.md").read_text()
    assert "base URL that\nends in `/api/v1`" in guide


def paragraphs(text: str) -> list[str]:
    """The prose of a Markdown page: no code, no tables, no headings."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [
        " ".join(block.split())
        for block in re.split(r"\n\s*\n", prose)
        if block.strip() and not block.lstrip().startswith(("|", "#"))
    ]


@pytest.mark.parametrize("path", DOCS, ids=lambda path: path.name)
def test_no_paragraph_of_the_docs_says_a_sentence_twice(path):
    repeated = []
    for paragraph in paragraphs(path.read_text()):
        openings = [
            " ".join(sentence.lower().split()[:5])
            for sentence in re.split(r"(?<=[.:])\s+(?=[A-Z`])", paragraph)
            if len(sentence.split()) >= 5
        ]
        repeated += [opening for opening in set(openings) if openings.count(opening) > 1]
    assert repeated == []


DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"
FIRST_PANELS = [
    "Request rate by route",
    "Error rate",
    "Latency percentiles",
    "429s by bucket",
    "Webhook queue and lag",
    "Database connections in use",
]


def families() -> set[str]:
    """The metric families mapapi's registry describes, with their sample suffixes."""
    names = set()
    for family in metrics.REGISTRY.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
    return names | {
        "mapapi_database_connections_in_use",
        "mapapi_webhook_attempts_due",
        "mapapi_webhook_oldest_due_age_seconds",
    }  # the scrape-time collector's, which needs a running process


def test_the_grafana_dashboard_shows_the_first_panels_from_families_mapapi_exposes():
    dashboard = json.loads(DASHBOARD.read_text())
    titles = [panel["title"] for panel in dashboard["panels"]]
    assert set(FIRST_PANELS) <= set(titles), titles
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\b(?:mapapi|process)_[a-z_]+", target["expr"])
    }
    assert queried and queried <= families(), queried - families()
    assert "grafana-dashboard.json" in (ROOT / "docs" / "deploy.md").read_text()


def test_a_loopback_webhook_url_is_refused_naming_the_setting_that_allows_it(api):
    refused = api.post("/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": ["*"]})
    assert refused.status_code == 400
    (message,) = refused.get_json()["error"]["details"]["url"]
    assert "MAPAPI_WEBHOOKS_ALLOW_PRIVATE=1" in message, message
