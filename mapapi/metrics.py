"""What ``serve`` and ``worker`` show Prometheus on ``MAPAPI_METRICS_ADDRESS``.

One registry per process, served by prometheus_client's own HTTP server in
a thread of its own, apart from the API's port. The families:

- ``mapapi_http_requests_total`` and ``mapapi_http_request_duration_seconds``
  by route template (the URL rule, never the path asked for), method and
  status (``http.request_metrics``);
- ``mapapi_rate_limited_requests_total`` by bucket;
- ``mapapi_webhook_attempts_total`` by outcome;
- ``mapapi_events_recorded_total`` by event type, counted once committed;
- read when scraped: ``mapapi_database_connections_in_use`` (and idle),
  ``mapapi_webhook_attempts_due`` and ``mapapi_webhook_oldest_due_age_seconds``;
- ``mapapi_build_info`` (the version) and the ``process_*`` families of
  prometheus_client, ``process_start_time_seconds`` among them.

No label holds an account, a key, an id or a value a client sent: routes,
methods, statuses, buckets, outcomes and event types are all fixed sets.
Counting is always on (a counter costs a lock and an addition); only the
per-request step waits for the server to start (``serving``).
"""

import logging

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    Info,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import start_http_server
from sqlalchemy import event as sqlalchemy_event
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from . import __version__
from .delivery.claims import due_attempt
from .extensions import db
from .services.events import RECORDED_EVENTS
from .timeutil import utcnow

log = logging.getLogger(__name__)

# A ``_created`` series beside every counter and histogram: clutter that no
# dashboard here reads.
disable_created_metrics()
REGISTRY = CollectorRegistry()

REQUESTS = Counter(
    "mapapi_http_requests",
    "Requests answered, by route template, method and status.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
REQUEST_SECONDS = Histogram(
    "mapapi_http_request_duration_seconds",
    "Time from a request's first step to its answer, by route template and method.",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=REGISTRY,
)
RATE_LIMITED = Counter(
    "mapapi_rate_limited_requests",
    "Requests refused with 429 RATE_LIMIT_EXCEEDED, by the bucket that refused them.",
    ["bucket"],
    registry=REGISTRY,
)
WEBHOOK_ATTEMPTS = Counter(
    "mapapi_webhook_attempts",
    "Webhook delivery attempts this process made, by outcome: succeeded, "
    "failed_status (the receiver answered, not with a 2xx) or failed_connection "
    "(no answer: address refused, name, connection, TLS or time-out).",
    ["outcome"],
    registry=REGISTRY,
)
ATTEMPT_OUTCOMES = ("succeeded", "failed_status", "failed_connection")
EVENTS = Counter(
    "mapapi_events_recorded",
    "Events of the change feed this process recorded (committed), by type.",
    ["type"],
    registry=REGISTRY,
)
Info("mapapi_build", "The mapapi version this process runs.", registry=REGISTRY).info(
    {"version": __version__}
)
ProcessCollector(registry=REGISTRY)

#: Whether this process serves its metrics: the per-request step does nothing otherwise.
serving = False


def count_attempt(outcome) -> None:
    """Count a webhook attempt's outcome (``delivery.sender.Outcome``)."""
    if outcome.succeeded:
        label = "succeeded"
    elif outcome.response_status is None:
        label = "failed_connection"
    else:
        label = "failed_status"
    WEBHOOK_ATTEMPTS.labels(label).inc()


def start_at_zero(counter: Counter, values) -> None:
    """Show a counter's series from the start, at 0, for each of ``values``
    of its one label: a rate over a series that appears only at its first
    increase misses that increase."""
    for value in values:
        counter.labels(value)


def _events_committed(session) -> None:
    """The events a transaction wrote (``services.events`` notes their types), counted once it commits."""
    for type_ in session.info.pop(RECORDED_EVENTS, ()):
        EVENTS.labels(type_).inc()


def _events_dropped(session, *_args) -> None:
    session.info.pop(RECORDED_EVENTS, None)


sqlalchemy_event.listen(db.session, "after_commit", _events_committed)
sqlalchemy_event.listen(db.session, "after_soft_rollback", _events_dropped)


class StateCollector:
    """What is read when Prometheus scrapes: the pool's connections, and the
    due webhook attempts (one query; left out, and logged, when the database
    does not answer)."""

    def __init__(self, app):
        self.app = app

    def collect(self):
        with self.app.app_context():
            pool = db.engine.pool
            if hasattr(pool, "checkedout"):
                yield GaugeMetricFamily(
                    "mapapi_database_connections_in_use",
                    "Database connections of this process's pool in use now.",
                    value=pool.checkedout(),
                )
                yield GaugeMetricFamily(
                    "mapapi_database_connections_idle",
                    "Database connections of this process's pool open and idle now.",
                    value=pool.checkedin(),
                )
            try:
                due, oldest = self._due_attempts()
            except SQLAlchemyError as error:
                log.warning(
                    "metrics: the due webhook attempts cannot be read: %s", error.__class__.__name__
                )
                return
            yield GaugeMetricFamily(
                "mapapi_webhook_attempts_due",
                "Webhook attempts due now and waiting for a deliverer (all processes).",
                value=due,
            )
            yield GaugeMetricFamily(
                "mapapi_webhook_oldest_due_age_seconds",
                "How long the oldest due webhook attempt has waited (0 when none).",
                value=oldest,
            )

    @staticmethod
    def _due_attempts() -> tuple[int, float]:
        """By the deliverers' own rule (``claims.due_attempt``)."""
        now = utcnow()
        due, condition = due_attempt()
        with db.engine.connect() as connection:
            count, first = connection.execute(
                select(func.count(), func.min(due.c.next_attempt_at)).where(condition),
                {"now": now},
            ).one()
        return count, (now - first).total_seconds() if first is not None else 0.0


def serve_metrics(app, address: tuple[str, int]):
    """Answer scrapes on ``address`` from now on, in a daemon thread; the
    server (OSError when the address cannot be listened on)."""
    global serving
    host, port = address
    server, _thread = start_http_server(port, host, registry=REGISTRY)
    REGISTRY.register(StateCollector(app))
    start_at_zero(WEBHOOK_ATTEMPTS, ATTEMPT_OUTCOMES)
    serving = True
    return server
