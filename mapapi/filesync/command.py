"""``mapapi sync FILE --map MAP_ID``: the command, from its options to its summary line.

Exit 0 when done, 1 for a file or API error (its message on one line), 2 for
a bad option or setting. Progress and the summary go to standard output,
errors to standard error.
"""

import math
import re
import sys
import time
from collections import Counter
from urllib.parse import quote

import click

from ..commands.service_client import key_for, refuse_setting, url_option
from ..config import RATE_LIMIT_BUCKETS
from ..printable import printable
from .current import ExactIntegers, MapState, exact_parser, read_state
from .http_client import Service, ServiceError, Wait
from .plan import REFERENCES, Plan, delete_batches, make_plan, upsert_batches
from .progress import Progress
from .rows import DEFAULT_ID_COLUMNS, BadRow, Rows, csv_rows, geojson_rows
from .source import FileError, csv_file, geojson_features, is_geojson, read_bytes

#: Rows of each kind the plan shows.
SHOWN_ROWS = 5
#: Items named in the one line of a refused write.
SHOWN_DETAILS = 3
#: Bad rows listed, one line per problem; the others are counted by kind.
SHOWN_BAD_ROWS = 20
#: Kinds of problem named in the count of the bad rows not listed.
SHOWN_KINDS = 5
#: What a message says of a value (quoted, or a number): left out of its kind.
_VALUES = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[+-]?\d[\d.,eE+-]*")


@click.command("sync")
@click.argument("file")
@click.option("--map", "map_id", required=True, help="The id of the map to keep in step.")
@click.option(
    "--id-column",
    default=None,
    help="The column (GeoJSON: the property) that holds each row's externalId "
    "[default: externalId, else id].",
)
@click.option("--prune", is_flag=True, help="Delete the map's locations the file no longer has.")
@click.option("--dry-run", is_flag=True, help="Print the plan and write nothing.")
@url_option
def sync_command(file, map_id, id_column, prune, dry_run, url):
    """Keep a map in step with a CSV or GeoJSON file (FILE, or - for standard input).

    Rows are matched with the map's locations by externalId: new rows are
    created, changed rows updated, equal rows left alone; with --prune, the
    locations whose externalId the file no longer has are deleted. The key
    comes from MAPAPI_KEY.
    """
    key = key_for(url, used_by="the sync")
    if id_column is not None and not id_column.strip():
        refuse_setting("--id-column must name a column.")
    started = time.monotonic()
    run = Run(url, key, map_id)
    failure = None
    try:
        summary = run.sync(file, id_column, prune=prune, dry_run=dry_run)
    except (FileError, ServiceError) as error:
        failure = (f"error: {printable(error)}", 1)
    except KeyboardInterrupt:
        failure = ("interrupted: run the command again to finish the job", 130)
    finally:
        run.close()  # the progress bar first, so that the error comes below it
    if failure is not None:
        click.echo(failure[0], err=True)
        sys.exit(failure[1])
    seconds = time.monotonic() - started
    click.echo(f"{summary} in {seconds:.1f} s" + (" (dry run: nothing was written)" * dry_run))


class Run:
    """One run of the command against one map."""

    def __init__(self, url: str, key: str, map_id: str):
        self.map_id = map_id
        self.map_path = f"/maps/{quote(map_id, safe='')}"
        self.progress: Progress | None = None
        self.service = Service(url, key, self.waited)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.close()
        self.service.close()

    def waited(self, pause: Wait) -> None:
        if self.progress is not None:
            self.progress.wait(pause)
        else:
            click.echo(f"waiting {pause.seconds:.0f} s: {printable(pause.reason)}")

    def sync(self, file: str, id_column: str | None, *, prune: bool, dry_run: bool) -> str:
        """Read, check, plan and (unless ``dry_run``) write: the summary line's counts."""
        rows = read_rows(file, id_column)  # the header (or the collection) checked now
        the_map = self.service.get(self.map_path)
        state = self._read_state()
        plan = make_plan(rows, state, prune=prune)
        plan.bad += self._unknown_references(plan)
        if plan.bad:
            raise FileError(_bad_rows(rows, plan.bad, file))
        if not plan.upserts and not plan.unchanged:
            raise FileError(f"{file} has no rows: nothing to keep in step")
        click.echo(
            f"map {printable(repr(the_map.get('title', '')))} ({printable(self.map_id)}): "
            f"create {plan.created}, "
            f"update {plan.updated}, delete {len(plan.deletes)}, unchanged {plan.unchanged}"
        )
        upserts, deletes = list(upsert_batches(plan)), list(delete_batches(plan))
        if upserts or deletes:
            self._budget(len(upserts) + len(deletes))
        if dry_run:
            for line in _plan_rows(rows, plan):
                click.echo(line)
            return _counts(plan.created, plan.updated, len(plan.deletes), plan.unchanged)
        return self._write(rows, plan, state, upserts, deletes)

    def _budget(self, needed: int) -> None:
        """The requests of the sync bucket the run needs, and what the account
        has left (``GET /rate-limits``, which uses up nothing); before anything
        is sent, a warning for each bucket the run will wait for."""
        try:
            buckets = self.service.get("/rate-limits")["buckets"]
        except ServiceError as error:
            if error.status != 404:  # a service older than GET /rate-limits: no budget
                raise
            return
        sync = buckets["sync"]
        click.echo(
            f"requests: {needed} to the sync bucket, which has {sync['remaining']} of "
            f"{sync['limit']} left ({printable(sync['window'])})"
        )
        for name in ("sync", "general"):  # every write counts in the general bucket too
            bucket = buckets[name]
            if needed > bucket["remaining"]:
                click.echo(
                    f"warning: the run needs {needed} requests and the {name} bucket has "
                    f"{bucket['remaining']} left: it will wait up to {_waiting(bucket, needed)} "
                    f"for it to refill ({RATE_LIMIT_BUCKETS[name]}={printable(bucket['window'])} "
                    "sizes it)",
                    err=True,
                )

    def _read_state(self) -> MapState:
        """The map's locations, from its export (read twice when it holds an
        integer beyond 64 bits: the second time exactly)."""
        export = f"{self.map_path}/locations.geojson"
        try:
            return self.service.stream(export, read_state)
        except ExactIntegers:
            return self.service.stream(export, lambda chunks: read_state(chunks, exact_parser()))

    def _unknown_references(self, plan: Plan) -> list[BadRow]:
        """Rows naming a category, tag or layer the map does not have. The
        map's lists are read only when a write names an id that no location
        of the map uses already (so an unchanged run reads none)."""
        bad = []
        for name, unknown in plan.unknown_ids.items():
            if not unknown:
                continue
            plural = REFERENCES[name]
            listed = self._list_ids(plural)
            for one, number in unknown.items():
                if one not in listed:
                    message = f"{name}: {one!r} is not one of the map's {plural}"
                    bad.append(BadRow(number, [message]))
        return bad

    def _list_ids(self, plural: str) -> set[str]:
        ids, page = set(), 1
        while True:
            data = self.service.get(f"{self.map_path}/{plural}", {"page": page, "pageSize": 100})
            ids.update(item["id"] for item in data[plural])
            if page >= data["pagination"]["totalPages"]:
                return ids
            page += 1

    def _write(self, rows: Rows, plan: Plan, state: MapState, upserts: list, deletes: list) -> str:
        counts = {"created": 0, "updated": 0, "unchanged": plan.unchanged, "deleted": 0}
        if not plan.writes:
            return _counts(**counts)
        self.progress = Progress(plan.writes)
        for number, batch in enumerate(upserts, start=1):
            answer = self._send(rows, batch, state)
            for name in ("created", "updated", "unchanged"):
                counts[name] += answer[name]
            self.progress.batch(
                "upsert", number, len(upserts), len(batch.items),
                f"created {answer['created']}, updated {answer['updated']}, "
                f"unchanged {answer['unchanged']}",
            )  # fmt: skip
        for number, batch in enumerate(deletes, start=1):
            answer = self._send(rows, batch, state)
            counts["deleted"] += answer["count"]
            self.progress.batch("bulk delete", number, len(deletes), len(batch.items),
                                f"deleted {answer['count']}")  # fmt: skip
        self.progress.close()
        self.progress = None
        return _counts(counts["created"], counts["updated"], counts["deleted"], counts["unchanged"])

    def _send(self, rows: Rows, batch, state: MapState) -> dict:
        path = f"{self.map_path}/locations/{batch.path}"
        try:
            return self.service.post(path, batch.body, batch.idempotency_key(self.map_id, state))
        except ServiceError as error:
            shown = _refused_items(rows, batch, error.details)
            if shown:
                raise ServiceError(f"{error} ({shown})", error.status, error.code) from None
            raise


def read_rows(file: str, id_column: str | None) -> Rows:
    data = read_bytes(file)
    if is_geojson(data):
        return geojson_rows(geojson_features(data), id_column)
    return csv_rows(csv_file(data, (id_column,) if id_column else DEFAULT_ID_COLUMNS), id_column)


def _waiting(bucket: dict, needed: int) -> str:
    """How long a run of ``needed`` requests waits for ``bucket`` at most: a
    moving window gives back at most its ``limit`` over each window's length."""
    from limits import parse

    windows = math.ceil((needed - bucket["remaining"]) / bucket["limit"])
    return _duration(windows * parse(bucket["window"]).get_expiry())


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{math.ceil(seconds)} s"
    if seconds < 90 * 60:
        return f"{math.ceil(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _counts(created: int, updated: int, deleted: int, unchanged: int) -> str:
    return f"created {created}, updated {updated}, deleted {deleted}, unchanged {unchanged}"


def _bad_rows(rows: Rows, bad: list[BadRow], file: str) -> str:
    """The first ``SHOWN_BAD_ROWS`` bad rows on standard error, a line per
    message, then how many more and of which kinds; the one line of the error."""
    bad = sorted(bad)
    for row in bad[:SHOWN_BAD_ROWS]:
        for message in row.messages:
            click.echo(f"{rows.where(row.number)}: {printable(message)}", err=True)
    rest = bad[SHOWN_BAD_ROWS:]
    if rest:
        kinds = Counter(_VALUES.sub("…", message) for row in rest for message in row.messages)
        named = [f"{printable(kind)} ({count:,})" for kind, count in kinds.most_common(SHOWN_KINDS)]
        if len(kinds) > SHOWN_KINDS:
            named.append(f"{len(kinds) - SHOWN_KINDS:,} other kinds")
        click.echo(f"and {plural(len(rest), rows.place)} more: {'; '.join(named)}", err=True)
    verb = "is" if len(bad) == 1 else "are"
    return f"{plural(len(bad), rows.place)} of {printable(file)} {verb} invalid; nothing was written"


def plural(count: int, noun: str) -> str:
    """``1 line``, ``2 lines``, ``1,024 lines``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _plan_rows(rows: Rows, plan: Plan) -> list[str]:
    """The first rows of each kind the plan writes, their values escaped."""
    lines = [
        f"  create {rows.where(w.number)}: {printable(w.external_id)} {printable(w.shown)}"
        for w in plan.first(True, SHOWN_ROWS)
    ]
    lines += [
        f"  update {rows.where(w.number)}: {printable(w.external_id)} ({printable(w.shown)})"
        for w in plan.first(False, SHOWN_ROWS)
    ]
    lines += [
        f"  delete {printable(delete.external_id)} {printable(repr(delete.location.name))}"
        for delete in plan.deletes[:SHOWN_ROWS]
    ]
    return lines


def _refused_items(rows: Rows, batch, details) -> str:
    """The first items a refused write names, by their rows."""
    if not isinstance(details, dict):
        return ""
    by_index = next((value for value in details.values() if isinstance(value, dict)), {})
    shown = []
    for index, messages in list(by_index.items())[:SHOWN_DETAILS]:
        if index.isdigit() and int(index) < len(batch.items):
            item = batch.items[int(index)]
            where = rows.where(item) if isinstance(item, int) else f"externalId {item!r}"
            shown.append(f"{where}: {messages}")
    return "; ".join(shown)
