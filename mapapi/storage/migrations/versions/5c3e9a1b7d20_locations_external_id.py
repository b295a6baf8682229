"""locations.external_id, unique per map

The location's id in the client's own system. A unique index on
(map_id, external_id) makes it unique per map under races and serves the
lookups by it; NULLs never clash. Both steps alter the table in place on
SQLite (ADD COLUMN, CREATE INDEX): no copy of the table, whose drop would
cascade to the memberships that refer to it.

Revision ID: 5c3e9a1b7d20
Revises: 5c1e0f9a7d21
Create Date: 2026-11-25 15:30:00.000000

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '5c3e9a1b7d20'
down_revision = '5c1e0f9a7d21'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('locations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('external_id', sa.Text(), nullable=True))
        batch_op.create_index(
            'uq_locations_map_id_external_id', ['map_id', 'external_id'], unique=True
        )


def downgrade():
    with op.batch_alter_table('locations', schema=None) as batch_op:
        batch_op.drop_index('uq_locations_map_id_external_id')
        batch_op.drop_column('external_id')
