"""Members of an organization as its administrators see them: user ids, organization-scoped
metadata (agent-platform-api.md §2.4), removals (agent-platform-api.md §3.2, §4.9, §4.10) and
invitations."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.errors import Forbidden, Invalid, field_error
from domain.identity import ADMIN_ROLE, MEMBER_ROLE, Caller
from domain.text import check_storable_json

NOT_A_MEMBER = "User is not a member of this organization"
CANNOT_REMOVE_SELF = "You cannot remove yourself"
INVITATION_PENDING = "An invitation is already pending for this e-mail"
MAX_METADATA_BYTES = 64 * 1024
MAX_REMOVALS = 50
USER_ID = re.compile(r"user_[A-Za-z0-9]{1,64}")
# One address, no display name: what an identity provider sends an invitation to.
EMAIL = re.compile(
    r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+"
)
INVITATION_ID = re.compile(r"(?:inv|orginv)_[A-Za-z0-9]{1,64}")  # ours, and Clerk's
MIN_EMAIL = 3
MAX_EMAIL = 320
EMAIL_INVALID = "email must be an e-mail address"
INVITED_ROLES = (ADMIN_ROLE, MEMBER_ROLE)
ROLE_INVALID = "role must be org:admin or org:member"
DEFAULT_EXPIRY_DAYS = 7
MAX_EXPIRY_DAYS = 30
EXPIRY_INVALID = f"expiresInDays must be an integer from 1 to {MAX_EXPIRY_DAYS}"
USER_ID_INVALID = "userId must be a user identifier"
METADATA_INVALID = "metadata must be a JSON object"


@dataclass(frozen=True, slots=True, kw_only=True)
class Member:
    """A member of one organization (agent-platform-api.md §2.4): `public_metadata` belongs to this
    membership only."""

    id: str
    email: str | None
    first_name: str | None
    last_name: str | None
    public_metadata: dict[str, Any] = field(default_factory=dict)
    last_sign_in_at: datetime | None = None
    role: str | None = None


class InvitationStatus(StrEnum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    REVOKED = "revoked"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True, kw_only=True)
class Invitation:
    """An invitation to join an organization, accepted by the first call of a member whose
    token carries the same e-mail while it is pending and unexpired."""

    id: str
    email: str
    role: str
    status: InvitationStatus
    inviter_user_id: str
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How one entry of a removal went (agent-platform-api.md §2.7): `error` is None when it
    succeeded."""

    id: str
    error: str | None = None

    @property
    def success(self) -> bool:
        return self.error is None


def is_user_id(value: object) -> bool:
    """Whether `value` is a user identifier: `user_` and 1 to 64 letters or digits."""
    return isinstance(value, str) and USER_ID.fullmatch(value) is not None


def is_invitation_id(value: object) -> bool:
    """Whether `value` is an invitation identifier: `inv_` (the local directory's) or
    `orginv_` (Clerk's) and 1 to 64 letters or digits."""
    return isinstance(value, str) and INVITATION_ID.fullmatch(value) is not None


def check_user_id(value: object) -> str:
    """`value` when it is a user identifier; `Invalid` naming `userId` otherwise."""
    if not is_user_id(value):
        raise Invalid(
            USER_ID_INVALID,
            [field_error("userId", "expected user_ followed by 1 to 64 letters or digits")],
        )
    assert isinstance(value, str)
    return value


def check_metadata(value: object) -> dict[str, Any]:
    """Organization-scoped metadata (agent-platform-api.md §2.4 rules 2 and 3): a JSON object of any
    JSON values, at most 64 KiB once encoded, holding only text PostgreSQL can store."""
    if not isinstance(value, dict):
        raise Invalid(METADATA_INVALID, [field_error("metadata", "expected an object")])
    check_storable_json(value, "metadata")
    try:
        size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    except (TypeError, ValueError):
        raise Invalid(METADATA_INVALID, [field_error("metadata", "not JSON")]) from None
    if size > MAX_METADATA_BYTES:
        raise Invalid(
            "metadata must be at most 64 KiB",
            [field_error("metadata", f"{size} bytes once encoded; at most {MAX_METADATA_BYTES}")],
        )
    return value


def check_id_list(values: object, *, field_name: str, valid: Any, minimum: int = 1) -> list[str]:
    """A list of `minimum` to 50 distinct identifiers each accepted by `valid`; `Invalid`
    naming the field (and nothing done) otherwise."""
    if not isinstance(values, list) or not minimum <= len(values) <= MAX_REMOVALS:
        raise Invalid(
            f"{field_name} must hold {minimum} to {MAX_REMOVALS} ids",
            [field_error(field_name, f"{minimum} to {MAX_REMOVALS} ids")],
        )
    bad = [v for v in values if not valid(v)]
    if bad:
        raise Invalid(
            f"{field_name} holds an id that is not valid",
            [field_error(field_name, f"invalid id {str(v)[:80]!r}") for v in bad[:5]],
        )
    if len(set(values)) != len(values):
        raise Invalid(
            f"{field_name} holds the same id twice", [field_error(field_name, "repeated id")]
        )
    return list(values)


def parse_email(value: object) -> str:
    """An invitee's address: one address, no display name, at most 320 characters."""
    if not isinstance(value, str) or len(value) > MAX_EMAIL or not EMAIL.fullmatch(value):
        raise Invalid(EMAIL_INVALID, [field_error("email", "invalid")])
    return value


def parse_invited_role(value: object) -> str:
    """The role an invitation grants: `org:admin` or `org:member`."""
    if value not in INVITED_ROLES:
        raise Invalid(ROLE_INVALID, [field_error("role", "org:admin or org:member")])
    assert isinstance(value, str)
    return value


def parse_expiry_days(value: object) -> int:
    """How many days an invitation stays open: 1 to 30, 7 when absent."""
    if value is None:
        return DEFAULT_EXPIRY_DAYS
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_EXPIRY_DAYS:
        raise Invalid(EXPIRY_INVALID, [field_error("expiresInDays", f"1 to {MAX_EXPIRY_DAYS}")])
    return value


ADMIN_ONLY = "Only organization admins may do this"


def require_admin(caller: Caller) -> None:
    """`Forbidden` (403) unless the caller is an organization admin."""
    if not caller.is_admin:
        raise Forbidden(ADMIN_ONLY)


def removed_since(
    issued_at: float | None, removed_at: datetime | None, leeway: float = 0.0
) -> bool:
    """Whether a token issued at `issued_at` (Unix seconds, by the identity provider's clock)
    was issued at or before the member's last removal (by ours), give or take `leeway`
    seconds of skew between the two clocks, so that it no longer grants access. Identities the
    service makes itself (no `issued_at`) are never refused here."""
    if issued_at is None or removed_at is None:
        return False
    return issued_at <= removed_at.timestamp() + leeway


@dataclass(frozen=True, slots=True, kw_only=True)
class MembershipRemoved:
    """The identity provider removed `user_id` from `org_id` (its own console, its API)."""

    org_id: str
    user_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """A user's e-mail and names as the identity provider holds them; None where it holds
    none (or nothing the directory can keep)."""

    email: str | None = None
    first_name: str | None = None
    last_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MembershipSet:
    """The identity provider made `user_id` a member of `org_id` with `role`, or changed the
    membership (`organizationMembership.created|updated`); `profile` is what it said of the
    user with it."""

    org_id: str
    user_id: str
    role: str
    profile: Profile = field(default_factory=Profile)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserUpdated:
    """The identity provider changed the user's e-mail or names (`user.updated`)."""

    user_id: str
    profile: Profile


@dataclass(frozen=True, slots=True, kw_only=True)
class UserDeleted:
    """The identity provider deleted the user (`user.deleted`): a member of no organization."""

    user_id: str


IdentityEvent = MembershipRemoved | MembershipSet | UserUpdated | UserDeleted
"""What an identity provider's event asks of the directory."""
