"""location_tags index on (location_id, position, tag_id)

A location's tags in the order the client gave, read from the index alone
(no sort for each location of a page of Features: services.geojson).
Created without a batch, so SQLite does not copy the table.

Revision ID: 9b4f1c2d7e39
Revises: 9d4c2b7e1f30
Create Date: 2026-12-07 21:50:00.000000

"""
from alembic import op

# revision identifiers, used by Alembic.
revision = '9b4f1c2d7e39'
down_revision = '9d4c2b7e1f30'
branch_labels = None
depends_on = None


def upgrade():
    op.create_index(
        op.f('ix_location_tags_location_id_position_tag_id'),
        'location_tags',
        ['location_id', 'position', 'tag_id'],
        unique=False,
    )


def downgrade():
    op.drop_index(op.f('ix_location_tags_location_id_position_tag_id'), table_name='location_tags')
