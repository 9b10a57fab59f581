"""Skills and the records of their bundled files (migration 0006)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from advanced_alchemy.mixins import IdentityPrimaryKey
from advanced_alchemy.types import DateTimeUTC, JsonB
from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, Timestamps, now, org_column


class SkillModel(IdentityPrimaryKey, Timestamps, Base):
    """A skill; soft-deleted when `deleted_at` is set, which frees its name."""

    __tablename__ = "skills"
    __table_args__ = (
        Index(
            "ux_skills_org_name",
            "org_id",
            "name",
            unique=True,
            postgresql_where=text("deleted_at IS NULL"),
        ),
    )

    org_id: Mapped[str] = org_column()
    user_id: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(64, collation="C"))
    description: Mapped[str] = mapped_column(Text)
    license: Mapped[str | None] = mapped_column(Text)
    compatibility: Mapped[str | None] = mapped_column(Text)
    # `metadata` is the declarative base's own attribute.
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JsonB, server_default=text("'{}'::jsonb")
    )
    allowed_tools: Mapped[str | None] = mapped_column(Text)
    skill_md: Mapped[str] = mapped_column(Text)
    skill_md_sha256: Mapped[str] = mapped_column(String(64))
    skill_md_updated_at: Mapped[dt.datetime] = now()
    version: Mapped[int] = mapped_column(Integer, server_default="1")
    deleted_at: Mapped[dt.datetime | None] = mapped_column(DateTimeUTC(timezone=True))


class SkillFileModel(Timestamps, Base):
    """The record of a file bundled with a skill; its bytes are at `storage_key`."""

    __tablename__ = "skill_files"

    org_id: Mapped[str] = org_column()
    skill_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("skills.id", ondelete="CASCADE"), primary_key=True
    )
    path: Mapped[str] = mapped_column(String(255), primary_key=True)
    storage_key: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInteger)
    content_type: Mapped[str] = mapped_column(String(255))
    sha256: Mapped[str] = mapped_column(String(64))
