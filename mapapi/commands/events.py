"""``mapapi events``: the change feed's events."""

import click

from ..extensions import db
from ..services import events as event_service
from .common import operator_command


@click.group("events")
def events_group():
    """The change feed's events."""


@events_group.command("sweep")
@operator_command
def sweep_events():
    """Delete the events older than MAPAPI_EVENTS_RETENTION_DAYS now.

    `mapapi serve` sweeps by itself every few minutes while it records
    events; this is for a database nobody writes to, or a cron job.
    """
    deleted = 0
    while True:
        batch = event_service.sweep()
        db.session.commit()
        deleted += batch
        if batch < event_service.SWEEP_BATCH:
            break
    click.echo(f"{deleted} events deleted")
