"""`POST /webhooks/inbound-email`: a raw message from the mail provider, signed with
`AP_INBOUND_EMAIL_SECRET`, into files of the knowledge base it was sent to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from dishka import FromDishka
from litestar import Request, Response, post
from litestar.enums import ParamType
from litestar.exceptions import HTTPException, NotFoundException
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import (
    OpenAPIFormat,
    OpenAPIMediaType,
    OpenAPIType,
    Operation,
    RequestBody,
    Schema,
)
from litestar.openapi.spec import Parameter as OpenAPIParameter
from litestar.params import QueryParameter

from application.ports.inbound_email_verifier import InboundEmailVerifier
from application.use_cases.ingest_inbound_email import (
    IngestInboundEmail,
    IngestInboundEmailCommand,
)
from application.use_cases.route_inbound_email import RouteInboundEmail, RouteInboundEmailCommand
from domain.identity import Caller, Identity
from domain.inbound_email import MAX_HEADER_TEXT
from domain.uploads import UploadPolicy
from entrypoints.http.bodies import read_bounded
from entrypoints.http.injection import inject
from entrypoints.http.knowledge_base_schemas import KnowledgeBaseFileOut
from entrypoints.http.openapi import errors
from entrypoints.http.schemas import Camel
from entrypoints.wiring import OrgScopes

PATH = "/webhooks/inbound-email"
MEDIA_TYPE = "message/rfc822"
# Who acts for a message: no member, and no token (so no removal check, no provisioning).
ACTOR = "inbound-email"
# A message carries its attachments base64-encoded (a third larger) with headers and a body
# besides: twice the upload limit, plus 1 MiB, holds one attachment of the largest size.
BODY_FACTOR = 2
BODY_HEADROOM = 1024 * 1024


class InboundEmailReceipt(Camel, omit_defaults=True):
    success: bool
    email_id: str
    files: list[KnowledgeBaseFileOut]
    details: list[dict[str, Any]] = []


@dataclass
class _Operation(Operation):
    """The raw message body and the signature headers, which the handler reads itself."""

    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            content={
                MEDIA_TYPE: OpenAPIMediaType(
                    schema=Schema(
                        type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY, min_length=1
                    )
                )
            },
            description="The raw RFC 822 message, as the mail provider received it",
            required=True,
        )
        self.parameters = [
            *(self.parameters or []),
            _header("X-Inbound-Timestamp", "When the message was signed (Unix seconds)"),
            _header(
                "X-Inbound-Signature",
                '`v1=<hex HMAC-SHA256 of "<timestamp>.<body>">` under AP_INBOUND_EMAIL_SECRET; '
                "several `v1=` values may be sent, separated by commas or spaces",
            ),
        ]


def _header(name: str, description: str) -> OpenAPIParameter:
    return OpenAPIParameter(
        name=name,
        param_in=ParamType.HEADER,
        required=True,
        description=description,
        schema=Schema(type=OpenAPIType.STRING),
    )


@post(
    PATH,
    status_code=202,
    tags=["Knowledge Bases"],
    security=[],
    operation_class=_Operation,
    request_max_body_size=None,
    responses={
        200: ResponseSpec(
            data_container=InboundEmailReceipt,
            description="A message received before: the first delivery's files, nothing new",
            generate_examples=False,
        ),
        **errors(400, 404, 413, 415, public=True),
    },
    summary="Receive an e-mail into the knowledge base it was sent to",
    description="No bearer token: the signature is the credential (404 when "
    "AP_INBOUND_EMAIL_SECRET is unset). A bad, missing or old signature is 400 `Invalid "
    "signature`; a message that does not parse, or without attachments and with an empty "
    "body, is 400; no knowledge base with the recipient's address is 404 `Unknown "
    "recipient`. Each attachment and a non-empty body (`<subject>.md`) become files, "
    "processed like uploads, with `userMetadata` {emailId, emailSubject, emailFrom, emailDate, "
    "emailMessageId}; attachments over the upload limit are skipped and named in `details`.",
)
@inject
async def inbound_email(
    request: Request[Any, Any, Any],
    verifier: FromDishka[InboundEmailVerifier | None],
    route: FromDishka[RouteInboundEmail],
    scopes: FromDishka[OrgScopes],
    policy: FromDishka[UploadPolicy],
    recipient: Annotated[
        str | None,
        QueryParameter(
            description="The address the message was delivered to; without it the message's "
            "Delivered-To, X-Original-To, To and Cc are tried in that order",
            max_length=MAX_HEADER_TEXT,
        ),
    ] = None,
) -> Response[InboundEmailReceipt]:
    if verifier is None:
        raise NotFoundException()
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != MEDIA_TYPE:
        raise HTTPException(status_code=415, detail=f"Send the message as {MEDIA_TYPE}")
    raw = await read_bounded(request, policy.max_size * BODY_FACTOR + BODY_HEADROOM, "A message")
    verifier.verify(
        raw,
        request.headers.get("x-inbound-timestamp"),
        request.headers.get("x-inbound-signature"),
    )
    routed = await route.execute(RouteInboundEmailCommand(raw=raw, recipient=recipient))
    org_id = routed.recipient.org_id
    async with scopes.acting_as(Identity(user_id=ACTOR, org_id=org_id)) as scope:
        ingested = await (await scope.get(IngestInboundEmail)).execute(
            IngestInboundEmailCommand(
                caller=Caller(user_id=ACTOR, org_id=org_id),
                kb_id=routed.recipient.kb_id,
                email=routed.email,
            )
        )
    return Response(
        InboundEmailReceipt(
            success=True,
            email_id=ingested.email_id,
            files=KnowledgeBaseFileOut.of_all(ingested.files),
            details=ingested.skipped,
        ),
        status_code=200 if ingested.duplicate else 202,
    )
