from __future__ import annotations

from datetime import datetime
from typing import Protocol


class MembershipRemovals(Protocol):
    """When each user was last removed from each organization, so that every token of theirs
    issued at or before that moment is refused at once, in every server process, whatever
    identity provider removed them."""

    async def record(self, org_id: str, user_id: str, removed_at: datetime) -> None:
        """Remember (or move forward) the removal of `user_id` from `org_id`."""
        ...

    async def removed_at(self, org_id: str, user_id: str) -> datetime | None:
        """The user's last removal from the organization, or None."""
        ...
