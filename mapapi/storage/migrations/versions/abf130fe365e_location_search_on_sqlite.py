"""location_search: q's index on SQLite

An FTS5 table with the trigram tokenizer, holding the lower-cased copies of
each location's name, description and address under the location's pk as
rowid, kept in step by triggers on locations; filled here from the rows
that exist (storage/search_indexes.py says why it is made so). PostgreSQL
has its trigram indexes since location_filters: nothing is done there.
The statements are written out as they stood at this revision; the
application's own (for ``create_all``) must keep making the same.

Revision ID: abf130fe365e
Revises: 5c3e9a1b7d20
Create Date: 2026-11-25 18:40:00.000000

"""
from alembic import op

# revision identifiers, used by Alembic.
revision = 'abf130fe365e'
down_revision = '5c3e9a1b7d20'
branch_labels = None
depends_on = None

CREATE = [
    (
        "CREATE VIRTUAL TABLE location_search USING fts5(name_folded, description_folded,"
        " address_folded, tokenize = 'trigram case_sensitive 1', detail = none)"
    ),
    (
        "CREATE TRIGGER location_search_insert AFTER INSERT ON locations BEGIN"
        " INSERT INTO location_search (rowid, name_folded, description_folded, address_folded)"
        " VALUES (new.pk, new.name_folded, new.description_folded, new.address_folded); END"
    ),
    (
        "CREATE TRIGGER location_search_update"
        " AFTER UPDATE OF name_folded, description_folded, address_folded ON locations"
        " WHEN old.name_folded IS NOT new.name_folded"
        " OR old.description_folded IS NOT new.description_folded"
        " OR old.address_folded IS NOT new.address_folded BEGIN"
        " UPDATE location_search SET (name_folded, description_folded, address_folded)"
        " = (new.name_folded, new.description_folded, new.address_folded)"
        " WHERE rowid = old.pk; END"
    ),
    (
        "CREATE TRIGGER location_search_delete AFTER DELETE ON locations BEGIN"
        " DELETE FROM location_search WHERE rowid = old.pk; END"
    ),
    # The migration runs in one write transaction: no location is written
    # between this copy and the triggers.
    (
        "INSERT INTO location_search (rowid, name_folded, description_folded, address_folded)"
        " SELECT pk, name_folded, description_folded, address_folded FROM locations"
    ),
]


def upgrade():
    if op.get_bind().dialect.name != "sqlite":
        return
    for statement in CREATE:
        op.execute(statement)


def downgrade():
    if op.get_bind().dialect.name != "sqlite":
        return
    for trigger in ("insert", "update", "delete"):
        op.execute(f"DROP TRIGGER location_search_{trigger}")
    op.execute("DROP TABLE location_search")
