"""The indexes that serve ``q``, which the models cannot declare.

``q`` is a substring of a location's lower-cased name, description or
address (the stored copies of ``models.FOLDED_COLUMNS``): no B-tree serves
that, and each database has its own kind of index for it.

On PostgreSQL, a GIN index of each copy's trigrams (``pg_trgm``, a contrib
extension): on 100,000 locations, a ``q`` that matches nothing took 150 ms
as a scan and 15 ms with them, one that matches a tenth 150 and 100 ms.
Their pending lists are kept short (``PENDING_LIST_LIMIT``): GIN adds new
entries to an unsorted list that each search reads whole, merged into the
index only once it outgrows the limit (4 MB by default) or by VACUUM. On
the benchmark's map of 100,000 locations, after 3,000 locations created
one by one elsewhere, a request for the ~200 locations of an address took
27 ms with the default limit and 12.6 ms with 64 kB; writing each entry
straight into the index (``fastupdate = off``) answered in 12 ms but made
each insert cost 0.45 ms instead of 0.06 (0.09 with 64 kB).

On SQLite, an FTS5 table, ``location_search``, with the trigram tokenizer,
holding the same three copies: it finds the rows that hold a given
trigram (three characters), in any column. ``q`` is tested on the rows
that hold a few of its trigrams (``search_query``), instead of on each row
of the map; a ``q`` of fewer than three characters has no trigram, and is
tested on each row of the map. Its options:

- ``case_sensitive 1``: the copies are already lower-cased as Python does
  it, and FTS5's own folding (ASCII and part of Unicode) must not fold
  them again;
- ``detail = none``: the index says which rows hold a trigram, not where;
  positions would serve phrases, which ``search_query`` does not ask for.
  On the benchmark's 110,000 locations the table takes 20 MB (half of it
  its copy of the text), against 51 MB with positions, and answers as fast.

Its rowid is the location's ``pk``, an INTEGER PRIMARY KEY: an alias of
the rowid, which VACUUM keeps (the implicit rowid of a table without one,
it may renumber). By it a trigger finds a location's row (a column of the
location's id would be UNINDEXED, read in full for every delete), and the
filter reads the locations found (``locations.pk IN (...)``). The table
keeps its own copy of the text rather than reading it from ``locations``
(an external-content table): deleting a row then needs its rowid alone,
where an external-content table needs the exact text it indexed, and
silently corrupts its index when given other text.

Triggers keep it in step with every INSERT, UPDATE of a copy and DELETE of
a location, the deletes that cascade from a map or an account included
(SQLite fires triggers for foreign-key actions). FTS5 writes the rows a
statement added to disk when the statement ends, a few pages each time:
rows are best written many to a statement (a bulk create is one INSERT on
SQLite, ``services.locations``). In-process a bulk create of 100 then
costs 8 ms of CPU, against 7 without the table; one statement per row
cost 12. A migration that copies the locations table on
SQLite (Alembic's batch "move and copy") drops these triggers with the old
table: it must create them again, and fill the table again.

Both are made after the table by ``create_all`` and by the migrations that
added them (the SQLite one also fills the table from the rows there), and
autogenerate is told to leave them alone (``include_object``): a model's
``Index`` would also be created on SQLite, and no model declares a virtual
table.
"""

from sqlalchemy import (
    Boolean,
    and_,
    bindparam,
    event,
    literal_column,
    select,
    table,
    text,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import Grouping
from sqlalchemy.sql.functions import FunctionElement

from .models import FOLDED_COLUMNS, Location

TRIGRAM_INDEXES = {f"ix_locations_{column}_trgm": column for column in FOLDED_COLUMNS}
#: The trigram indexes' ``gin_pending_list_limit``, in kB (the smallest PostgreSQL takes).
PENDING_LIST_LIMIT = 64

SEARCH_TABLE = "location_search"
TRIGRAM = 3  # characters

_COLUMNS = ", ".join(FOLDED_COLUMNS)
_NEW_VALUES = ", ".join(f"new.{column}" for column in FOLDED_COLUMNS)
_CHANGED = " OR ".join(f"old.{column} IS NOT new.{column}" for column in FOLDED_COLUMNS)
#: The table, then its triggers: what ``create_all`` runs on SQLite.
SEARCH_TABLE_DDL = (
    (
        f"CREATE VIRTUAL TABLE {SEARCH_TABLE} USING fts5("
        f"{_COLUMNS}, tokenize = 'trigram case_sensitive 1', detail = none)"
    ),
    (
        f"CREATE TRIGGER {SEARCH_TABLE}_insert AFTER INSERT ON locations BEGIN "  # noqa: S608 (constants)
        f"INSERT INTO {SEARCH_TABLE} (rowid, {_COLUMNS}) VALUES (new.pk, {_NEW_VALUES}); END"
    ),
    (
        f"CREATE TRIGGER {SEARCH_TABLE}_update AFTER UPDATE OF {_COLUMNS} ON locations "  # noqa: S608 (constants)
        f"WHEN {_CHANGED} BEGIN "
        f"UPDATE {SEARCH_TABLE} SET ({_COLUMNS}) = ({_NEW_VALUES}) WHERE rowid = old.pk; END"
    ),
    (
        f"CREATE TRIGGER {SEARCH_TABLE}_delete AFTER DELETE ON locations BEGIN "  # noqa: S608 (constants)
        f"DELETE FROM {SEARCH_TABLE} WHERE rowid = old.pk; END"
    ),
)


def create_search_indexes(connection) -> None:
    """The trigram indexes on PostgreSQL, the search table on SQLite."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
        for name, column in TRIGRAM_INDEXES.items():
            connection.execute(
                text(
                    f"CREATE INDEX IF NOT EXISTS {name} ON locations "
                    f"USING gin ({column} gin_trgm_ops) "
                    f"WITH (gin_pending_list_limit = {PENDING_LIST_LIMIT})"
                )
            )
    elif connection.dialect.name == "sqlite":
        for statement in SEARCH_TABLE_DDL:
            connection.execute(text(statement))


def include_object(_object, name, type_, _reflected, _compare_to) -> bool:
    """For autogenerate: everything but the trigram indexes and the search
    table (with the tables FTS5 keeps its index in: ``location_search_data``...)."""
    if type_ == "index":
        return name not in TRIGRAM_INDEXES
    if type_ == "table":
        return name != SEARCH_TABLE and not name.startswith(f"{SEARCH_TABLE}_")
    return True


def search_query(folded: str) -> str:
    """An FTS5 query for the rows that hold each of a few of ``folded``'s
    trigrams (its first, its middle one and its last): every row that
    contains ``folded`` holds them all.

    Each trigram is a string in double quotes, its own double quotes
    doubled: no operator, column filter or prefix star of the query syntax
    can come from ``q``. All of them in order (a phrase of ``folded``) would
    find exactly the rows that contain it, but costs more the longer
    ``folded`` is, and the rows found are tested exactly anyway. Counting
    the 212 matches of a 17-character address among the benchmark's 110,000
    locations took 2.8 ms with the phrase, 0.45 ms with these 3 trigrams
    (31 ms testing each location of the map); the first and the last
    trigram alone took 0.3 ms there, but found twice the rows of "old mill".
    """
    trigrams = [folded[start : start + TRIGRAM] for start in range(len(folded) - TRIGRAM + 1)]
    spread = dict.fromkeys((trigrams[0], trigrams[len(trigrams) // 2], trigrams[-1]))
    return " AND ".join('"' + trigram.replace('"', '""') + '"' for trigram in spread)


def has_trigram(folded: str) -> bool:
    """Whether the search table can look ``folded`` up: three characters or more."""
    return len(folded) >= TRIGRAM


def found_by_search_index(condition, folded: str):
    """``condition``, the exact test of a ``q`` lower-cased as ``folded``
    (one that ``has_trigram``), tested on SQLite only on the locations the
    search table finds for ``folded``; elsewhere ``condition`` alone.

    The exact test stays: the table only narrows the rows tested. A row
    it finds in excess fails the test, and it misses no row that passes
    (it holds the same lower-cased text), so the answer is the condition's.
    """
    return _FoundBySearchIndex(condition, bindparam(None, search_query(folded)))


class _FoundBySearchIndex(FunctionElement):
    type = Boolean()
    inherit_cache = True
    name = "found_by_search_index"
    # A condition as it stands, never compared with 1 (SQLite's booleans):
    # "(...) = 1" would hide the IN from SQLite's planner.
    _is_implicitly_boolean = True


# In parentheses: the element stands for one condition wherever it is put.
@compiles(_FoundBySearchIndex)
def _exact_test_alone(element, compiler, **kw):
    condition, _phrase = element.clauses
    return compiler.process(Grouping(condition), **kw)


@compiles(_FoundBySearchIndex, "sqlite")
def _exact_test_of_the_candidates(element, compiler, **kw):
    condition, phrase = element.clauses
    candidates = (
        select(literal_column("rowid"))
        .select_from(table(SEARCH_TABLE))
        .where(literal_column(SEARCH_TABLE).match(phrase))
    )
    found = and_(Location.__table__.c.pk.in_(candidates), condition)
    return compiler.process(Grouping(found), **kw)


@event.listens_for(Location.__table__, "after_create")
def _after_create(_table, connection, **_kwargs) -> None:
    create_search_indexes(connection)
