"""PostgreSQL's trigram indexes for ``q``, which the models cannot declare.

``q`` is a substring of a location's lower-cased name, description or
address: no B-tree serves that, so on SQLite it reads the map's rows. On
PostgreSQL a GIN index of each lower-cased copy's trigrams (``pg_trgm``,
a contrib extension) finds them: on 100,000 locations, a ``q`` that
matches nothing took 150 ms as a scan and 15 ms with them, one that matches
a tenth 150 and 100 ms. A model's ``Index`` would also be created on
SQLite, as a B-tree of every description, so these are made here, after
the table by ``create_all`` (and by the migration that added them), and autogenerate is
told to leave them alone (``include_object``).
"""

from sqlalchemy import event, text

from .models import FOLDED_COLUMNS, Location

TRIGRAM_INDEXES = {f"ix_locations_{column}_trgm": column for column in FOLDED_COLUMNS}


def create_trigram_indexes(connection) -> None:
    """The extension and the indexes, on PostgreSQL (nothing elsewhere)."""
    if connection.dialect.name != "postgresql":
        return
    connection.execute(text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
    for name, column in TRIGRAM_INDEXES.items():
        connection.execute(
            text(
                f"CREATE INDEX IF NOT EXISTS {name} ON locations USING gin ({column} gin_trgm_ops)"
            )
        )


def include_object(_object, name, type_, _reflected, _compare_to) -> bool:
    """For autogenerate: everything but the trigram indexes."""
    return not (type_ == "index" and name in TRIGRAM_INDEXES)


@event.listens_for(Location.__table__, "after_create")
def _after_create(_table, connection, **_kwargs) -> None:
    create_trigram_indexes(connection)
