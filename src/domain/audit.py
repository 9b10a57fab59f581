"""The audit log: every administrative change of an organization, who made it and when."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

METADATA_REPLACED = "member.metadata_replaced"
MEMBER_REMOVED = "member.removed"
MEMBER_REMOVED_BY_PROVIDER = "member.removed_by_identity_provider"
MEMBER_ROLE_SET_BY_PROVIDER = "member.role_set_by_identity_provider"
INVITATION_CREATED = "invitation.created"
INVITATION_REVOKED = "invitation.revoked"
SKILL_DELETED = "skill.deleted"
SETTINGS_SAVED = "settings.saved"
DEFAULT_AUDIT_PAGE = 50
MAX_AUDIT_PAGE = 100
AUDIT_LIMIT_INVALID = f"limit must be an integer from 1 to {MAX_AUDIT_PAGE}"
MAX_AUDIT_CURSOR = 40
"""The longest `nextCursor` the audit log hands out (and takes back)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One administrative change: `details` holds what changed (before and after where it
    fits), never a secret."""

    id: int
    at: datetime
    actor_user_id: str | None
    action: str
    target_type: str
    target_id: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class NewAuditEntry:
    """An entry about to be written, in the same transaction as its change."""

    org_id: str
    actor_user_id: str | None
    action: str
    target_type: str
    target_id: str
    details: dict[str, Any] = field(default_factory=dict)
