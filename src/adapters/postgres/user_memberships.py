"""`UserMemberships` in Postgres: the two security-definer functions of migration 0018, the one
way the app role writes the memberships, removals and audit entries of organizations other
than its scope's (row-level security stays on for everything else it runs)."""

from __future__ import annotations

from datetime import datetime

from adapters.postgres.database import OrgConnection
from domain.members import Profile

UPDATE_PROFILE = "SELECT ap_update_member_profile($1, $2, $3, $4)"
REMOVE_EVERYWHERE = "SELECT ap_remove_member_everywhere($1, $2)"


class PgUserMemberships:
    """`UserMemberships` in Postgres, in the scope's transaction: `ap_update_member_profile`
    and `ap_remove_member_everywhere` (which writes the audit entries itself, as
    `member.removed_by_identity_provider`), each confined to the one user it is given."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def update_profile(self, user_id: str, profile: Profile) -> list[str]:
        rows = await self._db.fetch_in_transaction(
            UPDATE_PROFILE, user_id, profile.email, profile.first_name, profile.last_name
        )
        return [r[0] for r in rows]

    async def remove_everywhere(self, user_id: str, removed_at: datetime) -> list[str]:
        rows = await self._db.fetch_in_transaction(REMOVE_EVERYWHERE, user_id, removed_at)
        return [r[0] for r in rows]
