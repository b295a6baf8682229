"""location filters: lower-cased copies of the searched texts, and indexes

The list's filters and sorts read indexes, not the map's every row: a box
by (map_id, lat, lng), updatedSince and the updatedAt sort by (map_id,
updated_at, pk), the name sort by (map_id, name_folded, pk). The
lower-cased copies are Python's ``str.lower()`` of name, description and
address (what ``q`` matches, and what the name sort compares), filled in
here for the rows that exist; compared by code point on PostgreSQL too
(collation "C"). On PostgreSQL, trigram indexes of the copies serve
``q`` (storage/search_indexes.py: they need the pg_trgm extension, which
PostgreSQL's contrib package ships).

Revision ID: 5c1e0f9a7d21
Revises: 5e6b0c1d2a47
Create Date: 2026-11-25 15:40:00.000000

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "5c1e0f9a7d21"
down_revision = "5e6b0c1d2a47"
branch_labels = None
depends_on = None

FOLDED = {"name_folded": "name", "description_folded": "description", "address_folded": "address"}
BATCH = 1000


def _code_point_text():
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade():
    # Added with an empty default so that existing rows satisfy NOT NULL, then
    # filled in; the default is dropped again (the application writes them).
    with op.batch_alter_table("locations", schema=None) as batch_op:
        for column in FOLDED:
            batch_op.add_column(
                sa.Column(column, _code_point_text(), nullable=False, server_default="")
            )
    _fill_folded_columns()
    with op.batch_alter_table("locations", schema=None) as batch_op:
        # Not on SQLite: there a changed default means copying the table, and
        # dropping the old one (foreign keys on) deletes every row of
        # location_tags with it (ON DELETE CASCADE). The unused '' default stays.
        if op.get_bind().dialect.name != "sqlite":
            for column in FOLDED:
                batch_op.alter_column(column, server_default=None)
        batch_op.create_index(
            batch_op.f("ix_locations_map_id_lat_lng"), ["map_id", "lat", "lng"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_locations_map_id_updated_at_pk"),
            ["map_id", "updated_at", "pk"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_locations_map_id_name_folded_pk"),
            ["map_id", "name_folded", "pk"],
            unique=False,
        )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        for column in FOLDED:
            op.execute(
                f"CREATE INDEX ix_locations_{column}_trgm ON locations "
                f"USING gin ({column} gin_trgm_ops)"
            )


def _fill_folded_columns():
    """Python's lower-casing, which no database function reproduces, in batches by pk."""
    connection = op.get_bind()
    locations = sa.table(
        "locations", sa.column("pk"), *(sa.column(name) for name in (*FOLDED, *FOLDED.values()))
    )
    update = (
        locations.update()
        .where(locations.c.pk == sa.bindparam("row_pk"))
        .values({folded: sa.bindparam(f"new_{folded}") for folded in FOLDED})
    )
    last = 0
    while True:
        rows = connection.execute(
            sa.select(locations.c.pk, *(locations.c[source] for source in FOLDED.values()))
            .where(locations.c.pk > last)
            .order_by(locations.c.pk)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        connection.execute(
            update,
            [
                {
                    "row_pk": row.pk,
                    **{
                        f"new_{folded}": row._mapping[source].lower()
                        for folded, source in FOLDED.items()
                    },
                }
                for row in rows
            ],
        )
        last = rows[-1].pk


def downgrade():
    if op.get_bind().dialect.name == "postgresql":
        for column in FOLDED:
            op.execute(f"DROP INDEX ix_locations_{column}_trgm")
    with op.batch_alter_table("locations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_locations_map_id_name_folded_pk"))
        batch_op.drop_index(batch_op.f("ix_locations_map_id_updated_at_pk"))
        batch_op.drop_index(batch_op.f("ix_locations_map_id_lat_lng"))
        for column in FOLDED:
            batch_op.drop_column(column)
