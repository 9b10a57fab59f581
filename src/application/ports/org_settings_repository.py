from __future__ import annotations

from typing import Protocol

from domain.org_settings import OrgSettings


class OrgSettingsRepository(Protocol):
    """The saved settings of organizations, one object per organization, replaced whole.

    Every method takes the organization id and never reads or writes another organization's
    settings. Writes join the caller's unit of work: nothing is kept unless it commits.
    """

    async def get(self, org_id: str) -> OrgSettings | None:
        """The organization's saved settings, or None when it never saved any."""
        ...

    async def replace(
        self, org_id: str, settings: OrgSettings, *, updated_by: str
    ) -> OrgSettings | None:
        """Store `settings` in place of the organization's, recording who saved them; return
        the settings replaced (None if there were none). Concurrent saves of one organization
        are serialized, so each sees the settings the previous one stored."""
        ...
