from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from typing import Protocol

from domain.spend import CapPeriod, CapStatus, Period
from domain.usage import AbandonedCall, PendingCall, UsageEntry


class UsageLedger(Protocol):
    """Where every model call's tokens and cost are recorded, per organization, and where calls
    under way reserve their worst case against the organization's spend caps.

    Each method is its own transaction, whatever becomes of the caller's: a response that fails
    and rolls back is still charged for its tokens.
    """

    async def record(self, entry: UsageEntry, *, settles: str | None = None) -> None:
        """Append one entry; with `settles`, drop that reservation in the same transaction, and
        append nothing when it is gone already (the reaper settled it: never charged twice)."""
        ...

    async def reserve(
        self,
        org_id: str,
        reservation_id: str,
        amount: Decimal,
        *,
        ttl: timedelta,
        periods: Mapping[CapPeriod, Period],
        call: PendingCall,
    ) -> list[CapStatus]:
        """Atomically against every other reservation of the organization: when what each
        capped period recorded plus what is reserved (and not past its `ttl`) is still below its
        cap, reserve `amount` for `call` until it is settled or released, and return nothing;
        otherwise reserve nothing and return the periods reached (their `spent` includes what is
        reserved). An organization without caps is never refused, and its calls are reserved
        too (at no cost to the check), so that none goes unrecorded."""
        ...

    async def resize(
        self, org_id: str, reservation_id: str, amount: Decimal, *, prompt_tokens: int | None = None
    ) -> None:
        """Set a reservation's amount (and its prompt's estimate, when given), once the call's
        real worst case is known."""
        ...

    async def release(self, org_id: str, reservation_id: str) -> None:
        """Drop a reservation whose call cost nothing."""
        ...

    async def abandoned(self, quiet: timedelta, limit: int) -> list[AbandonedCall]:
        """Across organizations, at most `limit` reservations whose call can no longer settle
        itself: a call of a chat answer that has ended, reserved more than `quiet` ago, and any
        reservation past its `ttl`; with the text each chat answer stored."""
        ...

    async def spent(
        self, org_id: str, periods: Mapping[CapPeriod, Period]
    ) -> dict[CapPeriod, Decimal]:
        """What the organization's recorded model calls cost in each period."""
        ...
