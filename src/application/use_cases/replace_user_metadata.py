from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from application.ports.audit_log import AuditLog
from application.ports.identity_directory import IdentityDirectory
from application.ports.unit_of_work import UnitOfWork
from domain.audit import METADATA_REPLACED, NewAuditEntry
from domain.errors import Forbidden
from domain.identity import Caller
from domain.members import NOT_A_MEMBER, Member, check_metadata, check_user_id, require_admin


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplaceUserMetadataCommand:
    caller: Caller
    user_id: str
    metadata: dict[str, Any]

    @classmethod
    def parse(
        cls, *, caller: Caller, user_id: object, metadata: object
    ) -> ReplaceUserMetadataCommand:
        """Who, then what: an admin's request (403 otherwise); `userId` a user identifier and
        `metadata` a JSON object of at most 64 KiB of any JSON values (400 otherwise)."""
        require_admin(caller)
        return cls(caller=caller, user_id=check_user_id(user_id), metadata=check_metadata(metadata))


class ReplaceUserMetadata:
    """Replace a member's organization-scoped metadata (agent-platform-api.md §4.12 and §2.4).

    Rules: only admins (403). The metadata belongs to this membership
    only and is replaced whole, never merged. A user who is not a member of the caller's
    organization is 403 "User is not a member of this organization". The change is written
    to the audit log (the keys before and after, not the values, which leave with the
    membership) in the same transaction.
    """

    def __init__(self, directory: IdentityDirectory, audit: AuditLog, uow: UnitOfWork) -> None:
        self._directory = directory
        self._audit = audit
        self._uow = uow

    async def execute(self, command: ReplaceUserMetadataCommand) -> Member:
        caller = command.caller
        require_admin(caller)
        user_id, metadata = command.user_id, command.metadata
        before = await self._directory.get_member(caller.org_id, user_id)
        if before is None:
            raise Forbidden(NOT_A_MEMBER)
        member = await self._directory.replace_metadata(caller.org_id, user_id, metadata)
        if member is None:
            raise Forbidden(NOT_A_MEMBER)
        await self._audit.record(
            NewAuditEntry(
                org_id=caller.org_id,
                actor_user_id=caller.user_id,
                action=METADATA_REPLACED,
                target_type="user",
                target_id=user_id,
                # Key names only: the values are the member's, deleted with their membership.
                details={
                    "keysBefore": sorted(before.public_metadata),
                    "keysAfter": sorted(member.public_metadata),
                },
            )
        )
        await self._uow.commit()
        return member
