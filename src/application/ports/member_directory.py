from __future__ import annotations

from datetime import datetime
from typing import Protocol

from domain.identity import Identity


class MemberDirectory(Protocol):
    """The local record of organizations and their members, kept from token claims."""

    async def record_seen(self, identity: Identity, seen_at: datetime) -> None:
        """Create or refresh the organization and the member's record (e-mail, names, role,
        last sign-in). Idempotent; leaves a member's metadata untouched."""
        ...
