from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from domain.members import Invitation, Member, Outcome


class DirectoryUnavailable(Exception):
    """The identity provider could not be reached or failed (after its retries); `message`
    says so without secrets and is safe to show."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class IdentityDirectory(Protocol):
    """The members and invitations of an organization, as its identity provider keeps them:
    a local directory in Postgres (the embedded default) or the provider's own API (Clerk).

    Every method is scoped to one organization and never touches another's members. A user who is
    not a member is reported (None, False), never raised. Failures of the provider itself raise
    `DirectoryUnavailable`. Removal deletes the membership with its organization-scoped metadata
    (agent-platform-api.md §2.4 rule 4): a later re-addition starts empty.
    """

    async def list_members(self, org_id: str) -> list[Member]:
        """Every current member of the organization (all pages)."""
        ...

    async def get_member(self, org_id: str, user_id: str) -> Member | None:
        """The member, or None when the user is not a member of the organization."""
        ...

    async def replace_metadata(
        self, org_id: str, user_id: str, metadata: dict[str, Any]
    ) -> Member | None:
        """Replace the member's organization-scoped metadata whole (never merged); the member
        as it is now, or None when the user is not a member."""
        ...

    async def remove_member(self, org_id: str, user_id: str) -> bool:
        """Remove the user from the organization with their metadata; False when they were
        not a member."""
        ...

    async def remove_members(self, org_id: str, user_ids: Sequence[str]) -> list[Outcome]:
        """Remove each user as `remove_member` does, independently (one failing stops none of
        the others; a remote provider is called concurrently within its bound): one `Outcome`
        per id, in order, whose error is `NOT_A_MEMBER` or the provider's failure."""
        ...

    async def create_invitation(
        self,
        org_id: str,
        *,
        email: str,
        role: str,
        inviter_user_id: str,
        expires_at: datetime,
    ) -> Invitation:
        """A new pending invitation; `Conflict` when one is pending for that e-mail."""
        ...

    async def list_invitations(self, org_id: str) -> list[Invitation]:
        """The organization's invitations, newest first, with their current status (a pending
        one past its expiry reads `expired`)."""
        ...

    async def revoke_invitation(self, org_id: str, invitation_id: str) -> bool:
        """Revoke a pending invitation; False when there is no pending one of that id."""
        ...
