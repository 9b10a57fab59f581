"""Fakes of the inbound e-mail ports: the deliveries each knowledge base received and the
cross-organization address book."""

from __future__ import annotations

from typing import TYPE_CHECKING

from domain.inbound_email import InboundDelivery, InboundRecipient

if TYPE_CHECKING:
    from application.ports.inbound_deliveries import InboundDeliveries
    from application.ports.inbound_recipients import InboundRecipients
    from tests.fakes.basics import Restorable

DeliveriesState = dict[tuple[str, int, str], InboundDelivery]


class FakeInboundDeliveries:
    def __init__(self) -> None:
        self.rows: DeliveriesState = {}

    def snapshot(self) -> DeliveriesState:
        return dict(self.rows)

    def restore(self, saved: DeliveriesState) -> None:
        self.rows = dict(saved)

    async def claim(
        self, org_id: str, kb_id: int, message_key: str, email_id: str
    ) -> InboundDelivery | None:
        key = (org_id, kb_id, message_key)
        if key in self.rows:
            return self.rows[key]
        self.rows[key] = InboundDelivery(email_id=email_id, file_ids=[])
        return None

    async def record_files(self, org_id: str, email_id: str, file_ids: list[str]) -> None:
        for key, delivery in self.rows.items():
            if key[0] == org_id and delivery.email_id == email_id:
                self.rows[key] = InboundDelivery(email_id=email_id, file_ids=list(file_ids))


class FakeInboundRecipients:
    """Addresses (lower case) to the knowledge base they feed."""

    def __init__(self, addresses: dict[str, InboundRecipient] | None = None) -> None:
        self.addresses = dict(addresses or {})
        self.asked: list[list[str]] = []

    async def find(self, addresses: list[str]) -> InboundRecipient | None:
        self.asked.append(list(addresses))
        return next((self.addresses[a] for a in addresses if a in self.addresses), None)


if TYPE_CHECKING:  # mypy checks the fakes against the ports they stand in for
    _deliveries: InboundDeliveries = FakeInboundDeliveries()
    _deliveries_store: Restorable[DeliveriesState] = FakeInboundDeliveries()
    _recipients: InboundRecipients = FakeInboundRecipients()
