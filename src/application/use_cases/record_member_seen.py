from __future__ import annotations

from application.ports.clock import Clock
from application.ports.member_directory import MemberDirectory
from application.ports.unit_of_work import UnitOfWork
from domain.identity import Identity


class RecordMemberSeen:
    """Just-in-time provisioning: keep the organization and member records current from the
    claims of a verified token (e-mail, names, role, last sign-in).

    Rules: runs only for tokens that carry an organization; never touches the member's
    organization-scoped metadata; idempotent, so concurrent first requests are safe. A token
    whose e-mail matches a pending, unexpired invitation of the organization accepts it
    (case-insensitively) and the member takes the invitation's role. The token's role claim
    becomes the member's role only when the member is new or the claim differs from the one
    their previous token made (the identity provider changed it): the role an invitation
    granted, or the identity provider's membership event set, sticks until then.
    """

    def __init__(self, directory: MemberDirectory, uow: UnitOfWork, clock: Clock) -> None:
        self._directory = directory
        self._uow = uow
        self._clock = clock

    async def execute(self, identity: Identity) -> None:
        if not identity.org_id:
            return
        now = self._clock.now()
        await self._directory.record_seen(identity, now)
        if identity.email:
            await self._directory.accept_invitation(identity, now)
        await self._uow.commit()
