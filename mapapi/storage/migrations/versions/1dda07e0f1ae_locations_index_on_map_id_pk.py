"""locations index on (map_id, pk)

A map's locations in creation order straight from the index, so that a
page deep into a big map walks index entries only. It replaces the index
on map_id alone, which it covers. Created before the old one is dropped,
so map_id lookups are indexed throughout.

Revision ID: 1dda07e0f1ae
Revises: 74b7cb5a2a07
Create Date: 2026-11-21 09:16:11.885437

"""
from alembic import op

# revision identifiers, used by Alembic.
revision = '1dda07e0f1ae'
down_revision = '74b7cb5a2a07'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('locations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_locations_map_id_pk'), ['map_id', 'pk'], unique=False)
        batch_op.drop_index(batch_op.f('ix_locations_map_id'))


def downgrade():
    with op.batch_alter_table('locations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_locations_map_id'), ['map_id'], unique=False)
        batch_op.drop_index(batch_op.f('ix_locations_map_id_pk'))
