"""``mapapi worker``: webhook delivery only, no HTTP server."""

import logging
import signal

import click
from flask import current_app
from flask.cli import with_appcontext

from .. import __version__
from ..delivery.addresses import warn_if_private_allowed
from ..delivery.worker import DeliveryWorker
from ..extensions import db
from ..log_output import log_to_stderr
from ..storage.upgrade import check_schema
from .common import open_database, shown_database, startup_errors
from .serving import start_metrics

log = logging.getLogger("mapapi.worker")


@click.command("worker")
@with_appcontext
def worker_command():
    """Deliver webhooks only (no HTTP server), until SIGTERM or SIGINT."""
    log_to_stderr()
    app = current_app._get_current_object()
    metrics_url = start_metrics(app)
    open_database()
    with startup_errors():
        check_schema()
    db.session.remove()
    log.info("mapapi %s: database %s", __version__, shown_database())
    warn_if_private_allowed(app.config["WEBHOOKS_ALLOW_PRIVATE"])
    worker = DeliveryWorker(app)

    def request_stop(signum, _frame):
        log.info("%s: finishing the attempts in flight, then stopping", signal.Signals(signum).name)
        worker.request_stop()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    log.info("Delivering webhooks%s", f", metrics on {metrics_url}" if metrics_url else "")
    worker.run()
    log.info("stopped")
