"""Foundation: pgvector, the app role, organizations, members, knowledge bases, files, job queue.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op
from pgqueuer.adapters.persistence.qb import QueryBuilderEnvironment
from sqlalchemy.dialects import postgresql as pg

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TENANT_TABLES = ("organizations", "memberships", "knowledge_bases", "knowledge_base_files")
QUEUE_TABLES = ("pgqueuer", "pgqueuer_log", "pgqueuer_schedules", "pgqueuer_statistics")


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def _execute_script(sql: str) -> None:
    """Run a multi-statement script through asyncpg's simple-query protocol."""
    dbapi_connection = op.get_bind().connection.dbapi_connection
    dbapi_connection.run_async(lambda conn: conn.execute(sql))


def _ts(name: str) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


def upgrade() -> None:
    role = app_role()
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    # The role the application acts as: owns nothing, cannot bypass row-level security.
    op.execute(
        f"""
        DO $$
        BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN
                CREATE ROLE "{role}" NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
            END IF;
            -- The owner acts as the role (SET ROLE) unless it is a superuser; an administrator
            -- may have granted that already, and then a GRANT would need ADMIN OPTION.
            IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
               AND NOT pg_has_role(current_user, '{role}',
                   CASE WHEN current_setting('server_version_num')::int >= 160000
                        THEN 'SET' ELSE 'MEMBER' END) THEN
                EXECUTE format('GRANT %I TO %I', '{role}', current_user);
            END IF;
        END
        $$;
        """
    )
    op.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')

    op.create_table(
        "organizations",
        sa.Column("org_id", sa.String(128), primary_key=True),
        sa.Column("settings", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        _ts("created_at"),
        _ts("updated_at"),
    )
    op.create_table(
        "memberships",
        sa.Column(
            "org_id",
            sa.String(128),
            sa.ForeignKey("organizations.org_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("user_id", sa.String(128), primary_key=True),
        sa.Column("email", sa.String(320)),
        sa.Column("first_name", sa.String(200)),
        sa.Column("last_name", sa.String(200)),
        sa.Column("role", sa.String(64), nullable=False),
        sa.Column(
            "public_metadata", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")
        ),
        sa.Column("last_sign_in_at", sa.DateTime(timezone=True)),
        _ts("created_at"),
        _ts("updated_at"),
    )
    op.create_table(
        "knowledge_bases",
        sa.Column("id", sa.BigInteger, sa.Identity(start=1, increment=1), primary_key=True),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text, nullable=False, server_default=""),
        sa.Column("embedding_model", sa.String(255), nullable=False),
        sa.Column("embedding_dimensions", sa.Integer, nullable=False),
        sa.Column("extraction_model", sa.String(255)),
        sa.Column("extraction_schema", pg.JSONB),
        sa.Column("source", pg.JSONB),
        sa.Column("trigger", pg.JSONB),
        sa.Column("pending_embedding_model", sa.String(255)),
        sa.Column("pending_embedding_dimensions", sa.Integer),
        sa.Column("reindex_error", sa.Text),
        _ts("created_at"),
        _ts("updated_at"),
    )
    op.create_index("ix_knowledge_bases_org", "knowledge_bases", ["org_id", "id"])
    op.create_table(
        "knowledge_base_files",
        sa.Column("id", sa.BigInteger, sa.Identity(start=1, increment=1), primary_key=True),
        sa.Column("org_id", sa.String(128), nullable=False),
        sa.Column(
            "knowledge_base_id",
            sa.BigInteger,
            sa.ForeignKey("knowledge_bases.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("file_id", sa.Uuid, nullable=False),
        sa.Column("file_name", sa.String(255), nullable=False),
        sa.Column("file_key", sa.String(1024), nullable=False),
        sa.Column("content_key", sa.String(1024), nullable=False),
        sa.Column("content_type", sa.String(255), nullable=False),
        sa.Column("file_size", sa.BigInteger),
        sa.Column("processing_status", sa.String(32), nullable=False),
        sa.Column("processing_error", sa.Text),
        sa.Column("image_keys", pg.ARRAY(sa.Text)),
        sa.Column("user_metadata", pg.JSONB),
        sa.Column("extracted_data", pg.JSONB),
        _ts("created_at"),
        _ts("updated_at"),
        sa.UniqueConstraint("org_id", "file_id", name="uq_knowledge_base_files_org_file"),
        sa.CheckConstraint(
            "processing_status IN ('parsing','parsed','chunking','completed',"
            "'parse_failed','chunk_failed','extract_failed')",
            name="ck_knowledge_base_files_status",
        ),
    )
    op.create_index(
        "ix_knowledge_base_files_kb",
        "knowledge_base_files",
        ["org_id", "knowledge_base_id", "created_at"],
    )

    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY org_isolation ON {table} "
            "USING (org_id = current_setting('app.org_id', true)) "
            "WITH CHECK (org_id = current_setting('app.org_id', true))"
        )
        op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO "{role}"')

    # The job queue spans organizations (a worker serves them all); its payloads name the
    # organization, and the worker scopes each job's own transaction to it.
    _execute_script(QueryBuilderEnvironment().build_install_query(create_schema=False))
    for table in QUEUE_TABLES:
        op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO "{role}"')
    op.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{role}"')


def downgrade() -> None:
    role = app_role()
    op.execute(f'REVOKE USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public FROM "{role}"')
    _execute_script(QueryBuilderEnvironment().build_uninstall_query())
    op.drop_table("knowledge_base_files")
    op.drop_table("knowledge_bases")
    op.drop_table("memberships")
    op.drop_table("organizations")
    op.execute(f'REVOKE USAGE ON SCHEMA public FROM "{role}"')
    # The role and the extension are cluster- and database-wide and may serve other databases
    # of the same cluster; they stay.
