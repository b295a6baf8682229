"""webhooks and their deliveries

Webhook endpoints of an account, and one row per delivery attempt (the
body it sends, its outcome, and the claim of the process making it).

Revision ID: 5e6b0c1d2a47
Revises: 5e1f0c2a9b7d
Create Date: 2026-11-25 15:20:04.356805

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '5e6b0c1d2a47'
down_revision = '5e1f0c2a9b7d'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('webhooks',
    sa.Column('pk', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('id', sa.String(length=22), nullable=False),
    sa.Column('account_id', sa.String(length=22), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('events', sa.JSON(), nullable=False),
    sa.Column('map_id', sa.String(length=22), nullable=True),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('secret', sa.String(length=64), nullable=False),
    sa.Column('cursor', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('enabled_since', sa.DateTime(), nullable=False),
    sa.Column('disabled_since', sa.DateTime(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['account_id'], ['accounts.id'], name=op.f('fk_webhooks_account_id_accounts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('pk', name=op.f('pk_webhooks')),
    sa.UniqueConstraint('id', name=op.f('uq_webhooks_id'))
    )
    with op.batch_alter_table('webhooks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhooks_account_id'), ['account_id'], unique=False)

    op.create_table('webhook_deliveries',
    sa.Column('pk', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('id', sa.String(length=22), nullable=False),
    sa.Column('webhook_id', sa.String(length=22), nullable=False),
    sa.Column('event_id', sa.Text(), nullable=False),
    sa.Column('event_type', sa.String(length=40), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=10), nullable=False),
    sa.Column('response_status', sa.Integer(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('duration_ms', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(), nullable=True),
    sa.Column('claim', sa.String(length=32), nullable=True),
    sa.ForeignKeyConstraint(['webhook_id'], ['webhooks.id'], name=op.f('fk_webhook_deliveries_webhook_id_webhooks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('pk', name=op.f('pk_webhook_deliveries')),
    sa.UniqueConstraint('id', name=op.f('uq_webhook_deliveries_id'))
    )
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhook_deliveries_status_next_attempt_at'), ['status', 'next_attempt_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_webhook_deliveries_webhook_id_pk'), ['webhook_id', 'pk'], unique=False)



def downgrade():
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_deliveries_webhook_id_pk'))
        batch_op.drop_index(batch_op.f('ix_webhook_deliveries_status_next_attempt_at'))

    op.drop_table('webhook_deliveries')
    with op.batch_alter_table('webhooks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhooks_account_id'))

    op.drop_table('webhooks')
