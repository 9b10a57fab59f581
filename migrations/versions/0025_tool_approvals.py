"""Tool approvals: an answer can pause until its member approves or denies the tool calls it
asked approval for (`domain.tool_approvals`; the approvals themselves live in the assistant
message's parts). Its status, `awaiting_approval`, is longer than the 16 characters the
statuses of runs, messages and conversations had room for; widening a `varchar` rewrites no
row.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

COLUMNS = (
    ("conversations", "stream_status", True),
    ("chat_messages", "status", True),
    ("chat_runs", "status", False),
)


def upgrade() -> None:
    for table, column, nullable in COLUMNS:
        op.alter_column(
            table,
            column,
            type_=sa.String(32),
            existing_type=sa.String(16),
            existing_nullable=nullable,
        )


def downgrade() -> None:
    for table, column, _ in COLUMNS:
        op.execute(
            f"UPDATE {table} SET {column} = 'cancelled' WHERE {column} = 'awaiting_approval'"
        )
    for table, column, nullable in COLUMNS:
        op.alter_column(
            table,
            column,
            type_=sa.String(16),
            existing_type=sa.String(32),
            existing_nullable=nullable,
        )
