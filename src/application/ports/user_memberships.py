from __future__ import annotations

from datetime import datetime
from typing import Protocol

from domain.members import Profile


class UserMemberships(Protocol):
    """One user's memberships in every organization at once, as the identity provider's user
    events change them: the one way the service writes across organizations (each write still
    confined to the memberships of that user)."""

    async def update_profile(self, user_id: str, profile: Profile) -> list[str]:
        """Set the user's e-mail and names, as given (None clears one), in each of their
        memberships; the organizations whose record changed, none when nothing did."""
        ...

    async def remove_everywhere(self, user_id: str, removed_at: datetime) -> list[str]:
        """Remove the user from every organization they are a member of, each removal as the
        identity provider's removal of one membership: the membership deleted with its
        metadata, the removal recorded at `removed_at` (a removal only moves forward, as
        `MembershipRemovals.record`) and written to that organization's audit log as
        `member.removed_by_identity_provider` with no acting user. The organizations, none
        when the user was a member of none."""
        ...
