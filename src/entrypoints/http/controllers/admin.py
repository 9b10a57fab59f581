"""`/admin/*`: an organization's members, their metadata, removals, invitations and the audit
log. Every route needs `org:admin`."""

from __future__ import annotations

from typing import Annotated

from dishka import FromDishka
from litestar import Controller, Response, delete, get, post
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import JSONBody, QueryParameter

from application.use_cases.create_invitation import CreateInvitation, CreateInvitationCommand
from application.use_cases.list_audit_log import ListAuditLog, ListAuditLogQuery
from application.use_cases.list_invitations import ListInvitations, ListInvitationsQuery
from application.use_cases.list_members import ListMembers, ListMembersQuery
from application.use_cases.remove_members import RemoveMembers, RemoveMembersCommand
from application.use_cases.replace_user_metadata import (
    ReplaceUserMetadata,
    ReplaceUserMetadataCommand,
)
from domain.audit import (
    AUDIT_LIMIT_INVALID,
    DEFAULT_AUDIT_PAGE,
    MAX_AUDIT_CURSOR,
    MAX_AUDIT_PAGE,
)
from domain.identity import Caller
from domain.members import require_admin
from entrypoints.http.injection import inject
from entrypoints.http.member_schemas import (
    AuditEntryOut,
    AuditLogResponse,
    BulkRemoveBody,
    BulkRemoveResponse,
    CreateInvitationBody,
    DeleteUsersBody,
    DeleteUsersResponse,
    InvitationListResponse,
    InvitationOut,
    InvitationResponse,
    MemberOut,
    RemovalGroup,
    UpdatedUser,
    UpdateMetadataBody,
    UpdateMetadataResponse,
)
from entrypoints.http.openapi import body_errors, errors
from entrypoints.http.rules import ParamRule, RuledQuery, access, limit
from entrypoints.http.schemas import command

DEPRECATED = {"Deprecation": "true", "Link": '</admin/users>; rel="successor-version"'}
LIMIT = RuledQuery(
    name="limit",
    ge=1,
    le=MAX_AUDIT_PAGE,
    description=f"Entries per page ({DEFAULT_AUDIT_PAGE})",
    rule=ParamRule(AUDIT_LIMIT_INVALID, limit(MAX_AUDIT_PAGE), "out of range"),
)
CURSOR = QueryParameter(
    name="cursor", max_length=MAX_AUDIT_CURSOR, description="`nextCursor` of a page"
)


class AdminController(Controller):
    path = "/admin"
    tags = ["Users"]
    opt = access(require_admin)

    @get(
        "/getUsersInOrg",
        responses=errors(403),
        summary="Every member of the organization, with their metadata",
    )
    @inject
    async def members(
        self, caller: FromDishka[Caller], use_case: FromDishka[ListMembers]
    ) -> list[MemberOut]:
        return MemberOut.from_entities(await use_case.execute(ListMembersQuery(caller=caller)))

    @post(
        "/updateUserMetadata",
        status_code=200,
        responses=body_errors(403, 405),
        summary="Replace a member's organization-scoped metadata",
    )
    @inject
    async def update_metadata(
        self,
        data: JSONBody[UpdateMetadataBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[ReplaceUserMetadata],
    ) -> UpdateMetadataResponse:
        member = await use_case.execute(
            command(ReplaceUserMetadataCommand.parse, data, caller=caller)
        )
        return UpdateMetadataResponse(
            success=True,
            user=UpdatedUser.from_entity(member),
        )

    @post(
        "/bulkRemove",
        status_code=200,
        responses={
            **body_errors(403, 405),
            207: ResponseSpec(
                data_container=BulkRemoveResponse,
                description="Some users were not removed: `errors` says why for each",
                generate_examples=False,
            ),
        },
        summary="Remove members (deprecated: DELETE /admin/users)",
        description="200 when every user was removed, 207 otherwise (`errors` lists why).",
        deprecated=True,
    )
    @inject
    async def bulk_remove(
        self,
        data: JSONBody[BulkRemoveBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[RemoveMembers],
    ) -> Response[BulkRemoveResponse]:
        removals = await use_case.execute(command(RemoveMembersCommand.parse, data, caller=caller))
        body = BulkRemoveResponse.of(removals.users)
        return Response(body, status_code=200 if body.success else 207, headers=DEPRECATED)

    @delete(
        "/users",
        status_code=200,
        responses={
            **body_errors(403),
            207: ResponseSpec(
                data_container=DeleteUsersResponse,
                description="Some entries failed: each group's `errors` says why",
                generate_examples=False,
            ),
        },
        summary="Remove members and revoke invitations",
        description="1 to 50 ids in all; 200 when every entry succeeded, 207 otherwise.",
    )
    @inject
    async def remove_users(
        self,
        data: JSONBody[DeleteUsersBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[RemoveMembers],
    ) -> Response[DeleteUsersResponse]:
        removals = await use_case.execute(command(RemoveMembersCommand.parse, data, caller=caller))
        users, invitations = RemovalGroup.of(removals.users), RemovalGroup.of(removals.invitations)
        success = not users.failed and not invitations.failed
        return Response(
            DeleteUsersResponse(success=success, users=users, invitations=invitations),
            status_code=200 if success else 207,
        )

    @post(
        "/invitations", status_code=201, responses=body_errors(403, 409), summary="Invite someone"
    )
    @inject
    async def invite(
        self,
        data: JSONBody[CreateInvitationBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[CreateInvitation],
    ) -> InvitationResponse:
        invitation = await use_case.execute(
            command(CreateInvitationCommand.parse, data, caller=caller)
        )
        return InvitationResponse(success=True, invitation=InvitationOut.from_entity(invitation))

    @get("/invitations", responses=errors(403), summary="The organization's invitations")
    @inject
    async def invitations(
        self, caller: FromDishka[Caller], use_case: FromDishka[ListInvitations]
    ) -> InvitationListResponse:
        found = await use_case.execute(ListInvitationsQuery(caller=caller))
        return InvitationListResponse(success=True, invitations=InvitationOut.from_entities(found))

    @get(
        "/audit-log",
        responses=errors(400, 403),
        summary="Every administrative change, newest first",
    )
    @inject
    async def audit_log(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[ListAuditLog],
        limit: Annotated[int | None, LIMIT] = None,
        cursor: Annotated[str | None, CURSOR] = None,
    ) -> AuditLogResponse:
        page = await use_case.execute(
            ListAuditLogQuery.parse(caller=caller, limit=limit, cursor=cursor)
        )
        return AuditLogResponse(
            success=True,
            entries=AuditEntryOut.from_entities(page.entries),
            next_cursor=page.next_cursor,
        )
