"""Messages delivered to knowledge bases by e-mail (migration 0010); the knowledge base's own
address and source are columns of `knowledge_bases` (`knowledge.py`)."""

from __future__ import annotations

import datetime as dt
import uuid

from sqlalchemy import BigInteger, ForeignKey, Index, Text, UniqueConstraint, Uuid, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, now, org_column


class InboundEmailModel(Base):
    """One message received by a knowledge base, with the files it became; a message id is
    taken once per knowledge base."""

    __tablename__ = "inbound_emails"
    __table_args__ = (
        UniqueConstraint(
            "org_id", "knowledge_base_id", "message_id", name="uq_inbound_emails_message"
        ),
        Index("ix_inbound_emails_kb", "knowledge_base_id"),
    )

    email_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    org_id: Mapped[str] = org_column()
    knowledge_base_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("knowledge_bases.id", ondelete="CASCADE")
    )
    message_id: Mapped[str] = mapped_column(Text)
    file_ids: Mapped[list[uuid.UUID]] = mapped_column(
        ARRAY(Uuid), server_default=text("'{}'::uuid[]")
    )
    received_at: Mapped[dt.datetime] = now()
