from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Protocol

from domain.spend import CapPeriod, Period


class SpendTotals(Protocol):
    """What an organization's recorded model calls cost, per capped period, read where the
    caller already is: on the request's own connection, so that a request holding one
    connection never waits for a second (with every connection held by such requests, none
    would come). `UsageLedger.spent` answers the same question on a connection of its own,
    for work outside a request."""

    async def spent(
        self, org_id: str, periods: Mapping[CapPeriod, Period]
    ) -> dict[CapPeriod, Decimal]:
        """What the organization's recorded model calls cost in each period (zero if none)."""
        ...
