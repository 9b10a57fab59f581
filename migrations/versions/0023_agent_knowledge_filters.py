"""An agent may be limited to the files whose fields and metadata match a filter.

`agents.knowledge_filters` holds the filter as the client sent it (the shape of `POST
/kb/search`'s `filters`), applied to every search the agent makes of its knowledge bases: the
passages put in its prompt and its `search_knowledge_base` tool. NULL, as for every existing
agent, is no limit.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("agents", sa.Column("knowledge_filters", pg.JSONB))


def downgrade() -> None:
    op.drop_column("agents", "knowledge_filters")
