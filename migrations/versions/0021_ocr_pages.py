"""How many pages of a file were read by OCR.

Scanned pages (a PDF page without a text layer, or an image: PNG, JPEG, TIFF) are read by OCR
when the file is extracted; `knowledge_base_files.ocr_pages` records how many, for the file
record's `ocrPages`. Files extracted before are counted 0.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "knowledge_base_files",
        sa.Column("ocr_pages", sa.Integer, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_column("knowledge_base_files", "ocr_pages")
