"""Inbound e-mail: the webhook's verifier (absent without a secret), the parser, the
cross-organization address lookup for the app's life; per scope, the deliveries and the use
case that ingests a message in its organization."""

from __future__ import annotations

from dishka import Provider, Scope, provide

from adapters.email.mime import StdlibEmailParser
from adapters.email.signature import HmacInboundEmailVerifier
from adapters.postgres.inbound_email import PgInboundDeliveries, PgInboundRecipients
from application.ports.clock import Clock
from application.ports.email_parser import EmailParser
from application.ports.inbound_deliveries import InboundDeliveries
from application.ports.inbound_email_verifier import InboundEmailVerifier
from application.ports.inbound_recipients import InboundRecipients
from application.use_cases.ingest_inbound_email import IngestInboundEmail
from application.use_cases.route_inbound_email import RouteInboundEmail
from domain.inbound_email import InboundEmailDomain
from entrypoints.config import Settings


class InboundEmailProvider(Provider):
    """Everything behind `POST /webhooks/inbound-email` and knowledge bases' addresses."""

    scope = Scope.REQUEST

    deliveries = provide(PgInboundDeliveries, provides=InboundDeliveries)
    ingest = provide(IngestInboundEmail)
    parser = provide(StdlibEmailParser, provides=EmailParser, scope=Scope.APP)
    recipients = provide(PgInboundRecipients, provides=InboundRecipients, scope=Scope.APP)
    route = provide(RouteInboundEmail, scope=Scope.APP)

    @provide(scope=Scope.APP)
    def domain(self, settings: Settings) -> InboundEmailDomain:
        return InboundEmailDomain(settings.inbound_email_domain)

    @provide(scope=Scope.APP)
    def verifier(self, settings: Settings, clock: Clock) -> InboundEmailVerifier | None:
        secret = settings.inbound_email_secret
        return HmacInboundEmailVerifier(secret, clock) if secret else None
