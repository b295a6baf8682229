"""events: the change feed

One row per change of an account's data, ordered by an integer id that is
never given twice (AUTOINCREMENT on SQLite), read by account in id order.

Revision ID: 5e1f0c2a9b7d
Revises: 5c1e0a9d7b42
Create Date: 2026-11-25 15:20:00.000000

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '5e1f0c2a9b7d'
down_revision = '5c1e0a9d7b42'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('events',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('account_id', sa.String(length=22), nullable=False),
    sa.Column('map_id', sa.String(length=22), nullable=True),
    sa.Column('type', sa.String(length=30), nullable=False),
    sa.Column('data', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['account_id'], ['accounts.id'], name=op.f('fk_events_account_id_accounts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_events')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_events_account_id_id'), ['account_id', 'id'], unique=False)


def downgrade():
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_events_account_id_id'))

    op.drop_table('events')
