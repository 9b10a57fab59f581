from __future__ import annotations

from datetime import datetime
from typing import Protocol

from domain.identity import Identity
from domain.members import Invitation


class MemberDirectory(Protocol):
    """The local record of organizations and their members, kept from token claims."""

    async def record_seen(self, identity: Identity, seen_at: datetime) -> None:
        """Create or refresh the organization and the member's record (e-mail, names, role,
        last sign-in). Idempotent; leaves a member's metadata untouched."""
        ...

    async def accept_invitation(self, identity: Identity, at: datetime) -> Invitation | None:
        """Accept the organization's pending, unexpired invitation for the identity's e-mail
        (case-insensitive), if any: it becomes `accepted` and the member takes its role. None
        when there is none (or the identity has no e-mail or organization)."""
        ...

    async def forget(self, org_id: str, user_id: str) -> bool:
        """Delete the member's local record with its organization-scoped metadata (the
        identity provider removed them); False when there was none."""
        ...
