"""Skills (Agent Skills): each skill's SKILL.md with the manifest read from its front matter,
and the records of its bundled files (their bytes are in object storage).

A skill is soft-deleted (`deleted_at`): it keeps its row and its file records, leaves every
listing, and frees its name, which is unique among the organization's active skills only. The
partial unique index on (org_id, name) also serves the listing of active skills by name. The
name sorts bytewise (`COLLATE "C"`), whatever the database's locale.

Revision ID: 0006
Revises: 0005_job_runs
Create Date: 2026-11-23
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0006"
down_revision = "0005_job_runs"
branch_labels = None
depends_on = None

TABLES = ("skills", "skill_files")


def app_role() -> str:
    return os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        nullable=nullable,
        server_default=None if nullable else sa.func.now(),
    )


def _org() -> sa.Column:
    return sa.Column("org_id", sa.String(128), nullable=False)


def upgrade() -> None:
    role = app_role()
    op.create_table(
        "skills",
        sa.Column("id", sa.BigInteger, sa.Identity(start=1, increment=1), primary_key=True),
        _org(),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(64, collation="C"), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("license", sa.Text),
        sa.Column("compatibility", sa.Text),
        sa.Column("metadata", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("allowed_tools", sa.Text),
        sa.Column("skill_md", sa.Text, nullable=False),
        sa.Column("skill_md_sha256", sa.String(64), nullable=False),
        _ts("skill_md_updated_at"),
        sa.Column("version", sa.Integer, nullable=False, server_default="1"),
        _ts("created_at"),
        _ts("updated_at"),
        _ts("deleted_at", nullable=True),
    )
    op.create_index(
        "ux_skills_org_name",
        "skills",
        ["org_id", "name"],
        unique=True,
        postgresql_where=sa.text("deleted_at IS NULL"),
    )
    op.create_table(
        "skill_files",
        _org(),
        sa.Column(
            "skill_id",
            sa.BigInteger,
            sa.ForeignKey("skills.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("path", sa.String(255), primary_key=True),
        sa.Column("storage_key", sa.Text, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("content_type", sa.String(255), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
    )
    for table in TABLES:
        _secure(table, role)
    op.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{role}"')


def _secure(table: str, role: str) -> None:
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    check = "org_id = current_setting('app.org_id', true)"
    op.execute(f"CREATE POLICY org_isolation ON {table} USING ({check}) WITH CHECK ({check})")
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO "{role}"')


def downgrade() -> None:
    for table in reversed(TABLES):
        op.drop_table(table)
