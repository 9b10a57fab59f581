from __future__ import annotations

from typing import Protocol

from domain.inbound_email import InboundDelivery


class InboundDeliveries(Protocol):
    """The messages each knowledge base has received, so that a redelivery adds nothing.

    Scoped to one organization like every repository; writes join the current unit of work.
    """

    async def claim(
        self, org_id: str, kb_id: int, message_key: str, email_id: str
    ) -> InboundDelivery | None:
        """Record `message_key` as received by the knowledge base under `email_id` and return
        None; when it was recorded before, record nothing and return that delivery. A
        concurrent claim of the same key waits until the first one's transaction ends: it
        sees the first delivery when that commits, and claims the key when it rolls back."""
        ...

    async def record_files(self, org_id: str, email_id: str, file_ids: list[str]) -> None:
        """Set the file ids the delivery became."""
        ...
