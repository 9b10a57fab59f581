"""`POST /webhooks/identity`: the identity provider's Svix-signed events (Clerk's)."""

from __future__ import annotations

from typing import Any

from dishka import FromDishka
from litestar import Request, post
from litestar.exceptions import NotFoundException

from adapters.identity.clerk_events import read_event
from application.ports.webhook_verifier import INVALID_WEBHOOK_SIGNATURE, WebhookVerifier
from application.use_cases.apply_identity_event import (
    ApplyIdentityEvent,
    ApplyIdentityEventCommand,
)
from domain.errors import Invalid
from domain.identity import Identity
from domain.members import MembershipRemoved, MembershipSet
from entrypoints.http.injection import inject
from entrypoints.http.openapi import errors
from entrypoints.http.schemas import Camel
from entrypoints.wiring import OrgScopes

# Who acts for a webhook: no member, and no token (so no removal check, no provisioning).
PROVIDER = "identity-provider"
MAX_MESSAGE_ID = 255


class WebhookReceipt(Camel):
    success: bool
    duplicate: bool


@post(
    "/webhooks/identity",
    status_code=200,
    tags=["Users"],
    security=[],
    responses=errors(400, 404, public=True),
    summary="Receive the identity provider's signed events",
    description="Svix headers `svix-id`, `svix-timestamp`, `svix-signature`; 404 when no "
    "webhook secret is configured. `organizationMembership.created|updated` add the member "
    "or set their role, `organizationMembership.deleted` removes the member, `user.updated` "
    "sets the user's e-mail and names and `user.deleted` removes the user from every "
    "organization; a repeated `svix-id` changes nothing; other events are acknowledged.",
    request_max_body_size=1024 * 1024,
)
@inject
async def identity_webhook(
    request: Request[Any, Any, Any],
    verifier: FromDishka[WebhookVerifier | None],
    scopes: FromDishka[OrgScopes],
) -> WebhookReceipt:
    if verifier is None:
        raise NotFoundException()
    body = await request.body()
    message = verifier.verify(body, dict(request.headers))
    if len(message.id) > MAX_MESSAGE_ID:
        raise Invalid(INVALID_WEBHOOK_SIGNATURE)
    event = read_event(body)
    # A user's events belong to no one organization: their writes go through the functions
    # that span organizations (`UserMemberships`).
    org_id = event.org_id if isinstance(event, MembershipRemoved | MembershipSet) else None
    async with scopes.acting_as(Identity(user_id=PROVIDER, org_id=org_id)) as scope:
        applied = await (await scope.get(ApplyIdentityEvent)).execute(
            ApplyIdentityEventCommand(message_id=message.id, event=event, sent_at=message.sent_at)
        )
    return WebhookReceipt(success=True, duplicate=not applied)
