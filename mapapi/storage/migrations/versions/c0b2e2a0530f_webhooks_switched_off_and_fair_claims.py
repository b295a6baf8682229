"""webhooks switched off, and fair claims

Endpoints keep when their failures began (``failing_since``) and why the
service disabled them (``disabled_reason``). Deliveries get the two
partial indexes a fair claim reads by endpoint: its pending attempts in
the order they are claimed (due time, then pk), and its claimed ones.

Revision ID: c0b2e2a0530f
Revises: c41d7e2b9a60
Create Date: 2026-12-02 10:00:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'c0b2e2a0530f'
down_revision = 'c41d7e2b9a60'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('webhooks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('disabled_reason', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('failing_since', sa.DateTime(), nullable=True))

    # Partial indexes: pending attempts by endpoint and due time, claimed ones by endpoint.
    pending = sa.text("status = 'pending'")
    claimed = sa.text("claim IS NOT NULL")
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.create_index('ix_webhook_deliveries_pending', ['webhook_id', 'next_attempt_at', 'pk'], unique=False, postgresql_where=pending, sqlite_where=pending)
        batch_op.create_index('ix_webhook_deliveries_claimed', ['webhook_id'], unique=False, postgresql_where=claimed, sqlite_where=claimed)


def downgrade():
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.drop_index('ix_webhook_deliveries_claimed')
        batch_op.drop_index('ix_webhook_deliveries_pending')

    with op.batch_alter_table('webhooks', schema=None) as batch_op:
        batch_op.drop_column('failing_since')
        batch_op.drop_column('disabled_reason')
