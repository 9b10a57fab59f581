"""Clerk's webhook events, read into what the service acts on. Clerk sends the whole object
in `data`; `organizationMembership.deleted` names the organization in `data.organization.id`
and the user in `data.public_user_data.user_id`."""

from __future__ import annotations

from typing import Any

import msgspec

from domain.errors import Invalid
from domain.members import MembershipRemoved, is_user_id

MEMBERSHIP_DELETED = "organizationMembership.deleted"
INVALID_EVENT = "Invalid webhook event"


def read_event(body: bytes) -> MembershipRemoved | None:
    """The removal an event announces, or None for an event the service has nothing to do
    about (other types: members are kept current from their tokens). `Invalid` for a body
    that is not a JSON object with a `type`, or a removal without its ids."""
    try:
        event = msgspec.json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        raise Invalid(INVALID_EVENT) from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise Invalid(INVALID_EVENT)
    if event["type"] != MEMBERSHIP_DELETED:
        return None
    data = event.get("data")
    org_id = _get(data, "organization", "id")
    user_id = _get(data, "public_user_data", "user_id")
    if not isinstance(org_id, str) or not org_id or len(org_id) > 128 or not is_user_id(user_id):
        raise Invalid(INVALID_EVENT)
    assert isinstance(user_id, str)
    return MembershipRemoved(org_id=org_id, user_id=user_id)


def _get(data: Any, outer: str, inner: str) -> Any:
    part = data.get(outer) if isinstance(data, dict) else None
    return part.get(inner) if isinstance(part, dict) else None
