from __future__ import annotations

from datetime import datetime
from typing import Protocol


class WebhookReceipts(Protocol):
    """The ids of the webhook messages already received, so that a redelivery is done once."""

    async def first_time(self, message_id: str, received_at: datetime) -> bool:
        """Record `message_id`; False when it had been recorded before (a redelivery)."""
        ...
