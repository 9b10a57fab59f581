"""Request and response bodies of `/admin/*`: members, removals, invitations, audit log."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from msgspec import Meta

from domain.members import (
    DEFAULT_EXPIRY_DAYS,
    EMAIL,
    EMAIL_INVALID,
    EXPIRY_INVALID,
    INVITATION_ID,
    MAX_EMAIL,
    MAX_EXPIRY_DAYS,
    MAX_METADATA_BYTES,
    MAX_REMOVALS,
    METADATA_INVALID,
    MIN_EMAIL,
    ROLE_INVALID,
    USER_ID,
    USER_ID_INVALID,
    Outcome,
)
from entrypoints.http.rules import Rule
from entrypoints.http.schemas import Camel, documented

UserId = Annotated[
    str,
    Meta(
        description="`user_` and 1 to 64 letters or digits",
        extra_json_schema=documented(f"^{USER_ID.pattern}$", examples=["user_2abc"]),
    ),
]
InvitationId = Annotated[str, Meta(extra_json_schema=documented(f"^{INVITATION_ID.pattern}$"))]


def _ids_of(pattern: str) -> dict[str, object]:
    """Litestar documents a list's items without their pattern: say it again (each once)."""
    return {"extra": {"items": {"type": "string", "pattern": pattern}, "uniqueItems": True}}


USER_ITEMS = _ids_of(f"^{USER_ID.pattern}$")
INVITATION_ITEMS = _ids_of(f"^{INVITATION_ID.pattern}$")
IDS_RULE = f"userIds must hold 1 to {MAX_REMOVALS} user ids"
UserIds = Annotated[
    list[UserId], Meta(min_length=1, max_length=MAX_REMOVALS, extra_json_schema=USER_ITEMS)
]


class UpdateMetadataBody(Camel):
    rules = (
        Rule("userId", USER_ID_INVALID, detail="a user id"),
        Rule("metadata", METADATA_INVALID, detail="expected an object"),
    )

    user_id: UserId
    metadata: Annotated[
        dict[str, Any],
        Meta(
            description=f"Any JSON object, at most {MAX_METADATA_BYTES // 1024} KiB once "
            "encoded; replaces the old whole"
        ),
    ]


class BulkRemoveBody(Camel):
    rules = (Rule("userIds", IDS_RULE, detail=f"1 to {MAX_REMOVALS} ids"),)

    user_ids: UserIds


class DeleteUsersBody(Camel):
    rules = (
        Rule("userIds", IDS_RULE, detail=f"at most {MAX_REMOVALS} ids"),
        Rule("invitationIds", "invitationIds must hold invitation ids", detail="invalid"),
    )

    user_ids: (
        Annotated[list[UserId], Meta(max_length=MAX_REMOVALS, extra_json_schema=USER_ITEMS)] | None
    ) = None
    invitation_ids: (
        Annotated[
            list[InvitationId], Meta(max_length=MAX_REMOVALS, extra_json_schema=INVITATION_ITEMS)
        ]
        | None
    ) = None


class CreateInvitationBody(Camel):
    rules = (
        Rule("email", EMAIL_INVALID, detail="invalid"),
        Rule("role", ROLE_INVALID, detail="org:admin or org:member"),
        Rule("expiresInDays", EXPIRY_INVALID, detail=f"1 to {MAX_EXPIRY_DAYS}"),
    )

    email: Annotated[
        str,
        Meta(
            min_length=MIN_EMAIL,
            max_length=MAX_EMAIL,
            extra_json_schema=documented(f"^{EMAIL.pattern}$", examples=["ada@example.com"]),
        ),
    ]
    role: Literal["org:admin", "org:member"]
    expires_in_days: (
        Annotated[
            int, Meta(ge=1, le=MAX_EXPIRY_DAYS, description=f"{DEFAULT_EXPIRY_DAYS} when absent")
        ]
        | None
    ) = None


class MemberOut(Camel):
    id: str
    email: str | None
    first_name: str | None
    last_name: str | None
    public_metadata: dict[str, Any]
    last_sign_in_at: datetime | None
    role: str | None


class UpdatedUser(Camel):
    id: str
    email: str | None
    first_name: str | None
    last_name: str | None
    public_metadata: dict[str, Any]


class UpdateMetadataResponse(Camel):
    success: bool
    user: UpdatedUser


class BulkSuccess(Camel):
    user_id: str
    success: bool


class BulkFailure(Camel):
    user_id: str
    success: bool
    error: str


class BulkRemoveResponse(Camel, omit_defaults=True):
    success: bool
    total: int
    successful: int
    failed: int
    results: list[BulkSuccess]
    errors: list[BulkFailure] | None = None

    @classmethod
    def of(cls, outcomes: list[Outcome]) -> BulkRemoveResponse:
        done = [BulkSuccess(user_id=o.id, success=True) for o in outcomes if o.success]
        failed = [
            BulkFailure(user_id=o.id, success=False, error=o.error)
            for o in outcomes
            if o.error is not None
        ]
        return cls(
            success=not failed,
            total=len(outcomes),
            successful=len(done),
            failed=len(failed),
            results=done,
            errors=failed or None,
        )


class EntrySuccess(Camel):
    id: str
    success: bool


class EntryFailure(Camel):
    id: str
    success: bool
    error: str


class RemovalGroup(Camel, omit_defaults=True):
    total: int
    successful: int
    failed: int
    results: list[EntrySuccess]
    errors: list[EntryFailure] | None = None

    @classmethod
    def of(cls, outcomes: list[Outcome]) -> RemovalGroup:
        done = [EntrySuccess(id=o.id, success=True) for o in outcomes if o.success]
        failed = [
            EntryFailure(id=o.id, success=False, error=o.error)
            for o in outcomes
            if o.error is not None
        ]
        return cls(
            total=len(outcomes),
            successful=len(done),
            failed=len(failed),
            results=done,
            errors=failed or None,
        )


class DeleteUsersResponse(Camel):
    success: bool
    users: RemovalGroup
    invitations: RemovalGroup


class InvitationOut(Camel):
    id: str
    email: str
    role: str
    status: str
    inviter_user_id: str
    created_at: datetime
    expires_at: datetime


class InvitationResponse(Camel):
    success: bool
    invitation: InvitationOut


class InvitationListResponse(Camel):
    success: bool
    invitations: list[InvitationOut]


class AuditEntryOut(Camel):
    id: int
    at: datetime
    actor_user_id: str | None
    action: str
    target_type: str
    target_id: str
    details: dict[str, Any]


class AuditLogResponse(Camel):
    success: bool
    entries: list[AuditEntryOut]
    next_cursor: str | None
