"""Members and the identity provider: the directory (the local Postgres one, or Clerk's
Backend API when `AP_IDENTITY_DIRECTORY=clerk`), removals, the audit log, webhook receipts
and their use cases."""

from __future__ import annotations

import httpx
from dishka import Provider, Scope, provide, provide_all

from adapters.identity.clerk_directory import ClerkDirectory
from adapters.identity.svix_webhook import SvixWebhookVerifier
from adapters.postgres.audit_log import PgAuditLog
from adapters.postgres.database import OrgConnection
from adapters.postgres.members import PgIdentityDirectory
from adapters.postgres.membership_removals import PgMembershipRemovals
from adapters.postgres.user_memberships import PgUserMemberships
from adapters.postgres.webhook_receipts import PgWebhookReceipts
from application.ports.audit_log import AuditLog
from application.ports.identity_directory import IdentityDirectory
from application.ports.membership_removals import MembershipRemovals
from application.ports.user_memberships import UserMemberships
from application.ports.webhook_receipts import WebhookReceipts
from application.ports.webhook_verifier import WebhookVerifier
from application.use_cases.apply_identity_event import ApplyIdentityEvent
from application.use_cases.create_invitation import CreateInvitation
from application.use_cases.list_audit_log import ListAuditLog
from application.use_cases.list_invitations import ListInvitations
from application.use_cases.list_members import ListMembers
from application.use_cases.remove_members import RemoveMembers
from application.use_cases.replace_user_metadata import ReplaceUserMetadata
from entrypoints.config import Settings


class MemberProvider(Provider):
    """Everything behind `/admin/*` and `/webhooks/identity`."""

    scope = Scope.REQUEST

    audit = provide(PgAuditLog, provides=AuditLog)
    removals = provide(PgMembershipRemovals, provides=MembershipRemovals)
    receipts = provide(PgWebhookReceipts, provides=WebhookReceipts)
    users = provide(PgUserMemberships, provides=UserMemberships)
    use_cases = provide_all(
        ListMembers,
        ReplaceUserMetadata,
        RemoveMembers,
        CreateInvitation,
        ListInvitations,
        ListAuditLog,
        ApplyIdentityEvent,
    )

    @provide(scope=Scope.APP)
    def clerk(self, settings: Settings, client: httpx.AsyncClient) -> ClerkDirectory | None:
        if settings.identity_directory != "clerk" or not settings.clerk_secret_key:
            return None
        return ClerkDirectory(
            client, secret_key=settings.clerk_secret_key, base_url=settings.clerk_api_url
        )

    @provide
    def directory(self, clerk: ClerkDirectory | None, db: OrgConnection) -> IdentityDirectory:
        return clerk if clerk is not None else PgIdentityDirectory(db)

    @provide(scope=Scope.APP)
    def webhook_verifier(self, settings: Settings) -> WebhookVerifier | None:
        secret = settings.identity_webhook_secret
        return SvixWebhookVerifier(secret) if secret else None
