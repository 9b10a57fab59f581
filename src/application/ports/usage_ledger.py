from __future__ import annotations

from typing import Protocol

from domain.usage import UsageEntry


class UsageLedger(Protocol):
    """Where every model call's tokens and cost are recorded, per organization; spend caps
    read it. A record is written in its own transaction, whatever becomes of the caller's."""

    async def record(self, entry: UsageEntry) -> None:
        """Append one entry."""
        ...
