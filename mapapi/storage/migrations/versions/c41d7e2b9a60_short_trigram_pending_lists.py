"""short pending lists for the trigram indexes (PostgreSQL)

Each search of a GIN index reads its whole pending list, the entries added
since they were last merged into the index: with the default limit, 4 MB,
a ``q`` on a large map ran at half speed after a few thousand locations
were created. 64 kB keeps the list short at a small cost per insert
(storage/search_indexes.py has the figures). SQLite has no such index:
nothing is done there. The value is written out as it stood at this
revision; the application's own (for ``create_all``) must keep making it.

Revision ID: c41d7e2b9a60
Revises: abf130fe365e
Create Date: 2026-11-25 21:50:00.000000

"""
from alembic import op

# revision identifiers, used by Alembic.
revision = 'c41d7e2b9a60'
down_revision = 'abf130fe365e'
branch_labels = None
depends_on = None

INDEXES = [f"ix_locations_{column}_trgm" for column in ("name_folded", "description_folded", "address_folded")]


def upgrade():
    if op.get_bind().dialect.name != "postgresql":
        return
    for index in INDEXES:
        op.execute(f"ALTER INDEX {index} SET (gin_pending_list_limit = 64)")


def downgrade():
    if op.get_bind().dialect.name != "postgresql":
        return
    for index in INDEXES:
        op.execute(f"ALTER INDEX {index} RESET (gin_pending_list_limit)")
