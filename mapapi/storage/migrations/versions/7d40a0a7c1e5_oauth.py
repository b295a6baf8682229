"""OAuth: clients, grants, and their codes and tokens (stored hashed)

Revision ID: 7d40a0a7c1e5
Revises: c0b2e2a0530f
Create Date: 2026-12-07 21:45:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '7d40a0a7c1e5'
down_revision = "c0b2e2a0530f"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'oauth_clients',
        sa.Column('pk', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('client_id', sa.Text(), nullable=False),
        sa.Column('name', sa.Text(), nullable=False),
        sa.Column('redirect_uris', sa.JSON(), nullable=False),
        sa.Column('from_document', sa.Boolean(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('last_used_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('pk', name=op.f('pk_oauth_clients')),
        sa.UniqueConstraint('client_id', name=op.f('uq_oauth_clients_client_id')),
    )
    op.create_index(op.f('ix_oauth_clients_last_used_at'), 'oauth_clients', ['last_used_at'])
    op.create_table(
        'oauth_grants',
        sa.Column('pk', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('id', sa.String(length=22), nullable=False),
        sa.Column('account_id', sa.String(length=22), nullable=False),
        sa.Column('client_pk', sa.Integer(), nullable=False),
        sa.Column('scope', sa.String(length=40), nullable=False),
        sa.Column('redirect_uri', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('last_used_at', sa.DateTime(), nullable=True),
        sa.Column('revoked_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['account_id'], ['accounts.id'], name=op.f('fk_oauth_grants_account_id_accounts'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['client_pk'], ['oauth_clients.pk'], name=op.f('fk_oauth_grants_client_pk_oauth_clients'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('pk', name=op.f('pk_oauth_grants')),
        sa.UniqueConstraint('id', name=op.f('uq_oauth_grants_id')),
    )
    op.create_index(op.f('ix_oauth_grants_account_id'), 'oauth_grants', ['account_id'])
    op.create_index(op.f('ix_oauth_grants_client_pk'), 'oauth_grants', ['client_pk'])
    op.create_table(
        'oauth_codes',
        sa.Column('pk', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('grant_pk', sa.Integer(), nullable=False),
        sa.Column('code_hash', sa.String(length=64), nullable=False),
        sa.Column('redirect_uri', sa.Text(), nullable=True),
        sa.Column('code_challenge', sa.Text(), nullable=False),
        sa.Column('expires_at', sa.DateTime(), nullable=False),
        sa.Column('used_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['grant_pk'], ['oauth_grants.pk'], name=op.f('fk_oauth_codes_grant_pk_oauth_grants'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('pk', name=op.f('pk_oauth_codes')),
        sa.UniqueConstraint('code_hash', name=op.f('uq_oauth_codes_code_hash')),
    )
    op.create_index(op.f('ix_oauth_codes_grant_pk'), 'oauth_codes', ['grant_pk'])
    op.create_table(
        'oauth_tokens',
        sa.Column('pk', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('grant_pk', sa.Integer(), nullable=False),
        sa.Column('kind', sa.String(length=7), nullable=False),
        sa.Column('token_hash', sa.String(length=64), nullable=False),
        sa.Column('expires_at', sa.DateTime(), nullable=False),
        sa.Column('used_at', sa.DateTime(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['grant_pk'], ['oauth_grants.pk'], name=op.f('fk_oauth_tokens_grant_pk_oauth_grants'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('pk', name=op.f('pk_oauth_tokens')),
        sa.UniqueConstraint('token_hash', name=op.f('uq_oauth_tokens_token_hash')),
    )
    op.create_index(op.f('ix_oauth_tokens_grant_pk'), 'oauth_tokens', ['grant_pk'])
    op.create_table(
        'oauth_form_tokens',
        sa.Column('pk', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('token_hash', sa.String(length=64), nullable=False),
        sa.Column('browser_hash', sa.String(length=64), nullable=False),
        sa.Column('request_hash', sa.String(length=64), nullable=False),
        sa.Column('expires_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('pk', name=op.f('pk_oauth_form_tokens')),
        sa.UniqueConstraint('token_hash', name=op.f('uq_oauth_form_tokens_token_hash')),
    )
    op.create_index(op.f('ix_oauth_form_tokens_expires_at'), 'oauth_form_tokens', ['expires_at'])


def downgrade():
    op.drop_index(op.f('ix_oauth_form_tokens_expires_at'), table_name='oauth_form_tokens')
    op.drop_table('oauth_form_tokens')
    op.drop_index(op.f('ix_oauth_tokens_grant_pk'), table_name='oauth_tokens')
    op.drop_table('oauth_tokens')
    op.drop_index(op.f('ix_oauth_codes_grant_pk'), table_name='oauth_codes')
    op.drop_table('oauth_codes')
    op.drop_index(op.f('ix_oauth_grants_client_pk'), table_name='oauth_grants')
    op.drop_index(op.f('ix_oauth_grants_account_id'), table_name='oauth_grants')
    op.drop_table('oauth_grants')
    op.drop_index(op.f('ix_oauth_clients_last_used_at'), table_name='oauth_clients')
    op.drop_table('oauth_clients')
