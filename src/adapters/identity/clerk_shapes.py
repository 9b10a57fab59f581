"""Clerk's Backend API objects read into the domain's, and the merge patch that replaces a
membership's metadata whole through Clerk's deep-merging endpoint."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from domain.identity import normalise_role
from domain.members import Invitation, InvitationStatus, Member

DEFAULT_INVITATION_DAYS = 30  # Clerk's default when an invitation has no expiry


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def user_id_of(membership: Any) -> str | None:
    user_id = as_dict(as_dict(membership).get("public_user_data")).get("user_id")
    return user_id if isinstance(user_id, str) else None


def as_time(milliseconds: Any) -> datetime | None:
    if isinstance(milliseconds, bool) or not isinstance(milliseconds, int | float):
        return None
    if not math.isfinite(milliseconds):
        return None
    return datetime.fromtimestamp(milliseconds / 1000, UTC)


def as_text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def primary_email(user: Mapping[str, Any]) -> str | None:
    primary = user.get("primary_email_address_id")
    for address in as_list(user.get("email_addresses")):
        if isinstance(address, dict) and address.get("id") == primary:
            return as_text(address.get("email_address"))
    return None


def member_of(membership: Any, *, email: str | None, signed_in: datetime | None) -> Member:
    data = as_dict(membership)
    user = as_dict(data.get("public_user_data"))
    identifier = as_text(user.get("identifier"))
    if email is None and identifier and "@" in identifier:
        email = identifier  # the user's identifier is an e-mail when they sign in with one
    return Member(
        id=user_id_of(data) or "",
        email=email,
        first_name=as_text(user.get("first_name")),
        last_name=as_text(user.get("last_name")),
        public_metadata=as_dict(data.get("public_metadata")),
        last_sign_in_at=signed_in,
        role=normalise_role(as_text(data.get("role"))),
    )


def invitation_of(item: Any) -> Invitation:
    data = as_dict(item)
    created = as_time(data.get("created_at")) or datetime.now(UTC)
    expires = as_time(data.get("expires_at")) or created + timedelta(days=DEFAULT_INVITATION_DAYS)
    try:
        status = InvitationStatus(data.get("status") or "pending")
    except ValueError:
        status = InvitationStatus.EXPIRED  # a state we do not know cannot be accepted
    if status is InvitationStatus.PENDING and expires <= datetime.now(UTC):
        status = InvitationStatus.EXPIRED
    inviter = as_text(data.get("inviter_id")) or as_text(
        as_dict(data.get("public_inviter_data")).get("user_id")
    )
    role = as_text(data.get("role"))
    return Invitation(
        id=as_text(data.get("id")) or "",
        email=as_text(data.get("email_address")) or "",
        role=normalise_role(role) or "",
        status=status,
        inviter_user_id=inviter or "",
        created_at=created,
        expires_at=expires,
    )


def without_nulls(value: Any) -> Any:
    """`value` as a deep merge stores it: object keys whose value is null are absent (arrays are
    stored whole, nulls and all)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    return value


def merge_patch(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The body that deep-merges `current` into `wanted`: every key absent from `wanted` set
    to null, objects on both sides patched recursively, everything else sent whole."""
    patch: dict[str, Any] = {key: None for key in current if key not in wanted}
    for key, value in wanted.items():
        old = current.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            nested = merge_patch(old, value)
            if nested:
                patch[key] = nested
        elif key not in current or not same(old, value):
            patch[key] = value
    return patch


def same(a: Any, b: Any) -> bool:
    """JSON equality: 1 and 1.0 are the same number, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b
