"""idempotency keys: a POST's reservation, then its kept answer

Revision ID: 5c1e0a9d7b42
Revises: 1dda07e0f1ae
Create Date: 2026-11-25 15:40:00.000000

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '5c1e0a9d7b42'
down_revision = '1dda07e0f1ae'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'idempotency_keys',
        sa.Column('pk', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('account_id', sa.String(length=22), nullable=False),
        sa.Column('key', sa.String(length=255), nullable=False),
        sa.Column('fingerprint', sa.String(length=64), nullable=False),
        sa.Column('token', sa.String(length=32), nullable=False),
        sa.Column('started_at', sa.DateTime(), nullable=False),
        sa.Column('expires_at', sa.DateTime(), nullable=False),
        sa.Column('status', sa.Integer(), nullable=True),
        sa.Column('body', sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ['account_id'], ['accounts.id'],
            name=op.f('fk_idempotency_keys_account_id_accounts'), ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint('pk', name=op.f('pk_idempotency_keys')),
        sa.UniqueConstraint('account_id', 'key', name='uq_idempotency_keys_account_id_key'),
    )
    with op.batch_alter_table('idempotency_keys', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_idempotency_keys_expires_at'), ['expires_at'], unique=False)


def downgrade():
    with op.batch_alter_table('idempotency_keys', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_idempotency_keys_expires_at'))
    op.drop_table('idempotency_keys')
