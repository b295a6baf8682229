"""``mapapi serve``: the API under waitress."""

import logging
import sys

import click
from flask import current_app
from flask.cli import with_appcontext
from sqlalchemy.exc import IntegrityError

from .. import __version__, server
from .refusals import SettingRefused
from ..config import without_password
from ..delivery.addresses import warn_if_private_allowed
from ..delivery.worker import start_in_background
from ..extensions import db
from ..http.errors import APIError
from ..log_output import log_to_stderr
from ..services import accounts as account_service
from ..storage.upgrade import prepare_schema
from .common import (
    check_address,
    open_database,
    shown_database,
    startup_errors,
    storage_unreachable,
)
from .serving import source_of, start_metrics

log = logging.getLogger("mapapi.serve")

#: How long a stopping process lets the webhook attempts in flight finish
#: (an attempt cut short is made again by another process, or after a restart).
DELIVERY_DRAIN_SECONDS = 15


@click.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    envvar="MAPAPI_HOST",
    show_default=True,
    show_envvar=True,
    help="The address to listen on.",
)
@click.option(
    "--port",
    default=8080,
    envvar="MAPAPI_PORT",
    show_default=True,
    show_envvar=True,
    type=click.IntRange(1, 65535),
    help="The port to listen on, 1 to 65535.",
)
@server.limit_options
@with_appcontext
def serve_command(host, port, **limits):
    """Run the API under waitress (creates the schema on an empty database)."""
    log_to_stderr()
    app = current_app._get_current_object()
    port_source = source_of("port", f"--port {port}", f"MAPAPI_PORT={port}")
    check_address(host, port, source_of("host", "--host", "MAPAPI_HOST"), port_source)
    metrics_url = start_metrics(app, (host, port))
    # Unreachable, it would be found only at the first request: stop now, as for
    # the database (and before the database, so that nothing is written).
    unreachable = storage_unreachable(app.config["RATELIMIT_STORAGE_URI"])
    if unreachable:
        raise SettingRefused(unreachable)
    open_database(create=True)
    try:
        http = server.listen(app, host, port, server.Limits(**limits))
    except OSError as error:  # taken between the check and the bind
        raise SettingRefused(f"{port_source}: cannot listen on {host}: {error.strerror}.") from None
    with startup_errors():  # before the first log line: a refusal stays one line
        schema = prepare_schema()
    log.info(
        "mapapi %s: database %s, rate-limit storage %s",
        __version__,
        shown_database(),
        without_password(app.config["RATELIMIT_STORAGE_URI"]),
    )
    metrics = f", metrics on {metrics_url}" if metrics_url else ""
    log.info("Serving on http://%s:%s%s", http.effective_host, http.effective_port, metrics)
    log.info(schema)
    warn_if_private_allowed(app.config["WEBHOOKS_ALLOW_PRIVATE"])
    if app.config["BOOTSTRAP"]:
        with startup_errors():
            _bootstrap()
    db.session.remove()
    delivery = start_in_background(app)
    try:
        server.run(http)
    finally:
        if delivery is not None:
            thread, worker = delivery
            worker.request_stop()
            thread.join(timeout=DELIVERY_DRAIN_SECONDS)


def _bootstrap() -> None:
    """First run: an account and one key, its secret alone on stdout."""
    try:
        secret = account_service.bootstrap()
        db.session.commit()
    except (IntegrityError, APIError) as error:
        # Another process started at the same moment and made it: its insert
        # met ours (IntegrityError), or it committed between our two reads,
        # "no account yet" and "no account with this email" (a 409).
        db.session.rollback()
        if isinstance(error, APIError) and error.status != 409:
            raise
        return
    if secret:
        log.info(
            "First run: created the account %s and a READ_WRITE API key, "
            "printed on stdout (shown once)",
            account_service.BOOTSTRAP_EMAIL,
        )
        click.echo(secret)
        sys.stdout.flush()
