"""Inbound e-mail into knowledge bases: a knowledge base's address, and the messages received.

`knowledge_bases.source` becomes text (`'email'` or null; it was an unused JSON column, always
null) and `inbound_email_address` holds the address of a knowledge base fed by e-mail, unique
across organizations; a check keeps the two together.

`inbound_emails` records each message delivered to a knowledge base (its `Message-ID`, or a
digest of the message when it has none) with the files it became: the unique key refuses a
second delivery of the same message to the same knowledge base, concurrent ones included.

A webhook names no organization, so finding the knowledge base of an address crosses them:
`ap_inbound_email_recipient(addresses)` runs as the owner (SECURITY DEFINER) and returns only
the organization and the knowledge base of the first address that belongs to one. The owner
reads `knowledge_bases` through a policy of its own (SELECT only): row-level security is
forced on the owner too, unless it is a superuser.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

SOURCE_CHECK = (
    "source IS NULL AND inbound_email_address IS NULL "
    "OR source = 'email' AND inbound_email_address IS NOT NULL"
)
LOOKUP = "ap_inbound_email_recipient(text[])"


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def upgrade() -> None:
    role = app_role()
    op.alter_column(
        "knowledge_bases",
        "source",
        type_=sa.String(32),
        existing_type=pg.JSONB,
        postgresql_using="source #>> '{}'",
    )
    op.add_column("knowledge_bases", sa.Column("inbound_email_address", sa.String(320)))
    op.create_unique_constraint(
        "knowledge_bases_inbound_email_address_key", "knowledge_bases", ["inbound_email_address"]
    )
    op.create_check_constraint("ck_knowledge_bases_source", "knowledge_bases", SOURCE_CHECK)
    op.create_table(
        "inbound_emails",
        sa.Column("email_id", sa.Uuid, primary_key=True),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column(
            "knowledge_base_id",
            sa.BigInteger,
            sa.ForeignKey("knowledge_bases.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("message_id", sa.Text, nullable=False),
        sa.Column(
            "file_ids",
            pg.ARRAY(sa.Uuid),
            nullable=False,
            server_default=sa.text("'{}'::uuid[]"),
        ),
        sa.Column(
            "received_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.UniqueConstraint(
            "org_id", "knowledge_base_id", "message_id", name="uq_inbound_emails_message"
        ),
    )
    op.create_index("ix_inbound_emails_kb", "inbound_emails", ["knowledge_base_id"])
    op.execute("ALTER TABLE inbound_emails ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE inbound_emails FORCE ROW LEVEL SECURITY")
    check = "org_id = current_setting('app.org_id', true)"
    op.execute(
        f"CREATE POLICY org_isolation ON inbound_emails USING ({check}) WITH CHECK ({check})"
    )
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON inbound_emails TO "{role}"')
    op.execute(
        "CREATE POLICY inbound_email_lookup ON knowledge_bases FOR SELECT USING (current_user = "
        "(SELECT tableowner FROM pg_tables WHERE tablename = 'knowledge_bases'))"
    )
    op.execute(
        """
        CREATE FUNCTION ap_inbound_email_recipient(p_addresses text[])
        RETURNS TABLE (org_id text, knowledge_base_id bigint)
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT kb.org_id::text, kb.id
            FROM unnest(p_addresses[1:50]) WITH ORDINALITY AS a (address, position)
            JOIN knowledge_bases kb ON kb.inbound_email_address = lower(a.address)
            WHERE kb.source = 'email'
            ORDER BY a.position
            LIMIT 1
        $$
        """
    )
    op.execute(f"REVOKE ALL ON FUNCTION {LOOKUP} FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION {LOOKUP} TO "{role}"')


def downgrade() -> None:
    op.execute(f"DROP FUNCTION {LOOKUP}")
    op.execute("DROP POLICY inbound_email_lookup ON knowledge_bases")
    op.drop_table("inbound_emails")
    op.drop_constraint("ck_knowledge_bases_source", "knowledge_bases", type_="check")
    op.drop_constraint(
        "knowledge_bases_inbound_email_address_key", "knowledge_bases", type_="unique"
    )
    op.drop_column("knowledge_bases", "inbound_email_address")
    op.alter_column(
        "knowledge_bases",
        "source",
        type_=pg.JSONB,
        existing_type=sa.String(32),
        postgresql_using="to_jsonb(source)",
    )
