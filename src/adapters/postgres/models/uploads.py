"""The signed upload addresses handed out, and what became of each one's file (migration
0019)."""

from __future__ import annotations

import datetime as dt
import uuid

from advanced_alchemy.types import DateTimeUTC
from sqlalchemy import CheckConstraint, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, Timestamps, org_column

UPLOAD_STATES = ("issued", "associated", "deleted")


class IssuedUploadModel(Timestamps, Base):
    """An upload `POST /upload/presigned` signed: `issued`, then `associated` once its file is
    in a knowledge base, `deleted` once that file is gone."""

    __tablename__ = "issued_uploads"
    __table_args__ = (
        CheckConstraint(f"state IN {UPLOAD_STATES!r}", name="ck_issued_uploads_state"),
    )

    file_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    org_id: Mapped[str] = org_column()
    file_key: Mapped[str] = mapped_column(Text)
    content_type: Mapped[str] = mapped_column(String(255))
    expires_at: Mapped[dt.datetime] = mapped_column(DateTimeUTC(timezone=True))
    state: Mapped[str] = mapped_column(String(16), server_default="issued")
