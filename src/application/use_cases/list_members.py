from __future__ import annotations

from dataclasses import dataclass

from application.ports.identity_directory import IdentityDirectory
from domain.identity import Caller
from domain.members import Member, require_admin


@dataclass(frozen=True, slots=True, kw_only=True)
class ListMembersQuery:
    caller: Caller


class ListMembers:
    """Every current member of the caller's organization, with their organization-scoped
    metadata (agent-platform-api.md §4.11). Only admins may list them (403 otherwise)."""

    def __init__(self, directory: IdentityDirectory) -> None:
        self._directory = directory

    async def execute(self, query: ListMembersQuery) -> list[Member]:
        require_admin(query.caller)
        return await self._directory.list_members(query.caller.org_id)
