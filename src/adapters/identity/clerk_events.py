"""Clerk's webhook events, read into what the service acts on. Clerk sends the whole object
in `data`: an organization membership names the organization in `data.organization.id`, the
user in `data.public_user_data.user_id` (with `identifier`, `first_name`, `last_name`) and the
role in `data.role` (`org:admin`, `org:member`, a custom `org:…`); a user is `data.id` with
`email_addresses`, `primary_email_address_id`, `first_name`, `last_name`; a deleted user is
`{id, deleted: true}`."""

from __future__ import annotations

from typing import Any

import msgspec

from adapters.identity.clerk_shapes import as_dict, primary_email
from domain.errors import Invalid
from domain.identity import normalise_role
from domain.members import (
    EMAIL,
    MAX_EMAIL,
    IdentityEvent,
    MembershipRemoved,
    MembershipSet,
    Profile,
    UserDeleted,
    UserUpdated,
    is_user_id,
)
from domain.text import is_storable

MEMBERSHIP_CREATED = "organizationMembership.created"
MEMBERSHIP_UPDATED = "organizationMembership.updated"
MEMBERSHIP_DELETED = "organizationMembership.deleted"
USER_UPDATED = "user.updated"
USER_DELETED = "user.deleted"
INVALID_EVENT = "Invalid webhook event"
MAX_ORG_ID = 128
MAX_NAME = 200  # the directory's columns


def read_event(body: bytes) -> IdentityEvent | None:
    """What an event asks of the directory, or None for a type the service has nothing to do
    about. `Invalid` for a body that is not a JSON object with a `type`, or an event of a type
    acted on without its ids (a membership without its organization, user or role; a user
    without a user id). An e-mail or name the directory could not keep (too long, not
    storable, an identifier that is not an e-mail) reads as none."""
    try:
        event = msgspec.json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        raise Invalid(INVALID_EVENT) from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise Invalid(INVALID_EVENT)
    kind, data = event["type"], as_dict(event.get("data"))
    if kind == MEMBERSHIP_DELETED:
        return MembershipRemoved(org_id=_org_id(data), user_id=_member_id(data))
    if kind in (MEMBERSHIP_CREATED, MEMBERSHIP_UPDATED):
        role = normalise_role(_text(data.get("role"), MAX_NAME))
        if role is None:
            raise Invalid(INVALID_EVENT)
        user = as_dict(data.get("public_user_data"))
        return MembershipSet(
            org_id=_org_id(data),
            user_id=_member_id(data),
            role=role,
            profile=_profile(_email(user.get("identifier")), user),
        )
    if kind == USER_UPDATED:
        email = _email(primary_email(data))
        return UserUpdated(user_id=_user_id(data.get("id")), profile=_profile(email, data))
    if kind == USER_DELETED:
        return UserDeleted(user_id=_user_id(data.get("id")))
    return None


def _org_id(data: dict[str, Any]) -> str:
    org_id = as_dict(data.get("organization")).get("id")
    if not isinstance(org_id, str) or not org_id or len(org_id) > MAX_ORG_ID:
        raise Invalid(INVALID_EVENT)
    return org_id


def _member_id(data: dict[str, Any]) -> str:
    return _user_id(as_dict(data.get("public_user_data")).get("user_id"))


def _user_id(value: Any) -> str:
    if not is_user_id(value):
        raise Invalid(INVALID_EVENT)
    assert isinstance(value, str)
    return value


def _profile(email: str | None, names: dict[str, Any]) -> Profile:
    return Profile(
        email=email,
        first_name=_text(names.get("first_name"), MAX_NAME),
        last_name=_text(names.get("last_name"), MAX_NAME),
    )


def _email(value: Any) -> str | None:
    text = _text(value, MAX_EMAIL)
    return text if text is not None and EMAIL.fullmatch(text) else None


def _text(value: Any, longest: int) -> str | None:
    if not isinstance(value, str) or not is_storable(value):
        return None
    text = value.strip()
    return text if text and len(text) <= longest else None
