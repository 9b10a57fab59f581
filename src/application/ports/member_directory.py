from __future__ import annotations

from datetime import datetime
from typing import Protocol

from domain.identity import Identity
from domain.members import Invitation, Member, MembershipSet


class MemberDirectory(Protocol):
    """The local record of organizations and their members, kept from token claims and the
    identity provider's membership events."""

    async def record_seen(self, identity: Identity, seen_at: datetime) -> None:
        """Create or refresh the organization and the member's record (e-mail, names, last
        sign-in). Idempotent; leaves a member's metadata untouched. The token's role claim is
        remembered with the record; it becomes the member's role when the record is made, or
        when it differs from the claim remembered before (the identity provider changed the
        role), never otherwise: a role an invitation granted or a membership event set stays
        while the member's tokens keep claiming what they claimed."""
        ...

    async def set_membership(self, membership: MembershipSet, at: datetime) -> Member | None:
        """Make or change the membership as the identity provider's event says (the
        organization made too if new): its role, and the e-mail and names the event carries
        (one it does not carry is kept); the next token's claim is remembered without changing
        that role. The member as it was before; None when it was not a member."""
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
