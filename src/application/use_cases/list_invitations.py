from __future__ import annotations

from dataclasses import dataclass

from application.ports.identity_directory import IdentityDirectory
from domain.identity import Caller
from domain.members import Invitation, require_admin


@dataclass(frozen=True, slots=True, kw_only=True)
class ListInvitationsQuery:
    caller: Caller


class ListInvitations:
    """The organization's invitations, newest first, with their status (`pending`,
    `accepted`, `revoked`, `expired`). Only admins (403)."""

    def __init__(self, directory: IdentityDirectory) -> None:
        self._directory = directory

    async def execute(self, query: ListInvitationsQuery) -> list[Invitation]:
        require_admin(query.caller)
        return await self._directory.list_invitations(query.caller.org_id)
