"""location_cells: per-zoom cell counts of each map's locations

The table of ``storage.cells``, the triggers on ``locations`` that keep it
in step (statement-level on PostgreSQL, row-level on SQLite), and its rows
counted from the locations there. The migration runs in one transaction:
no location is written between the count and the triggers.

Revision ID: 9d4c2b7e1f30
Revises: 7d40a0a7c1e5
Create Date: 2026-12-07 22:00:00.000000

"""
from alembic import op
import sqlalchemy as sa

from mapapi.storage.cells import TABLE, create_cell_triggers, fill_cells


# revision identifiers, used by Alembic.
revision = '9d4c2b7e1f30'
down_revision = '7d40a0a7c1e5'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'location_cells',
        sa.Column('map_id', sa.String(length=22), nullable=False),
        sa.Column('level', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('y', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('x', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('count', sa.Integer(), nullable=False),
        sa.Column('sum_lat', sa.Float(), nullable=False),
        sa.Column('sum_lng', sa.Float(), nullable=False),
        sa.Column('min_lat', sa.Float(), nullable=False),
        sa.Column('max_lat', sa.Float(), nullable=False),
        sa.Column('min_lng', sa.Float(), nullable=False),
        sa.Column('max_lng', sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(['map_id'], ['maps.id'], name=op.f('fk_location_cells_map_id_maps'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('map_id', 'level', 'y', 'x', name=op.f('pk_location_cells')),
    )
    connection = op.get_bind()
    fill_cells(connection)
    create_cell_triggers(connection)


def downgrade():
    connection = op.get_bind()
    for name in ('insert', 'update', 'delete'):
        if connection.dialect.name == 'postgresql':
            op.execute(f'DROP TRIGGER IF EXISTS {TABLE}_{name} ON locations')
            op.execute(f'DROP FUNCTION IF EXISTS {TABLE}_{name}()')
        else:
            op.execute(f'DROP TRIGGER IF EXISTS {TABLE}_{name}')
    op.drop_table('location_cells')
