"""`/chat`: send a message to an agent and read the answer as an AI SDK UI message stream, or
poll for it; resume a running answer's stream; cancel it; approve or deny a tool call it
paused for.

Each route runs its use case in a short scope of its own (`OrgScopes`), not in the request's:
the request's scope lasts as long as the stream, and its connection would be held for minutes.
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from dishka import FromDishka
from litestar import Controller, Response, get, post
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import HeaderParameter, JSONBody
from litestar.response import Stream

from application.ports.chat_streams import ChatStreams
from application.use_cases.answer_tool_approval import (
    AnswerToolApproval,
    AnswerToolApprovalCommand,
)
from application.use_cases.cancel_chat_response import (
    CancelChatResponse,
    CancelChatResponseCommand,
)
from application.use_cases.follow_chat_response import (
    FollowChatResponse,
    FollowChatResponseQuery,
)
from application.use_cases.send_chat_message import SendChatMessage, SendChatMessageCommand
from domain.errors import Invalid, field_error
from domain.identity import Caller, Identity
from domain.tool_approvals import ApprovalDecision
from entrypoints.http.chat_schemas import (
    ApprovalBody,
    ApprovalResponse,
    CancelResponse,
    ChatAccepted,
    ChatBody,
)
from entrypoints.http.injection import inject
from entrypoints.http.openapi import body_errors, errors
from entrypoints.http.params import THREAD_PATH
from entrypoints.http.schemas import command
from entrypoints.http.sse import STREAM_HEADERS, sse_body
from entrypoints.wiring import OrgScopes

STREAM_MODE_INVALID = "X-Stream-Response must be true or false"


def _streaming(header: str | None) -> bool:
    if header is None:
        return True
    value = header.strip().lower()
    if value in ("true", "1", "yes", ""):
        return True
    if value in ("false", "0", "no"):
        return False
    raise Invalid(STREAM_MODE_INVALID, [field_error("X-Stream-Response", "expected true or false")])


def _event_stream(chunks: Any, thread_id: str) -> Stream:
    return Stream(
        sse_body(chunks),
        status_code=200,
        headers={**STREAM_HEADERS, "X-Thread-ID": thread_id},
        media_type="text/event-stream",
    )


class ChatController(Controller):
    path = "/chat"
    tags = ["Conversations"]

    @post(
        status_code=200,
        responses={
            **body_errors(402, 403, 404, 409),
            202: ResponseSpec(
                data_container=ChatAccepted,
                description="With `X-Stream-Response: false`: the answer is being produced; "
                "poll `GET /getConversation` (the id is also in `X-Thread-ID`)",
                generate_examples=False,
            ),
        },
        summary="Send a message to an agent",
        description="Streams the answer in the AI SDK UI message stream protocol v1 "
        "(`text/event-stream`), or with `X-Stream-Response: false` answers 202 and the client "
        "polls `GET /getConversation`. The conversation id is in `X-Thread-ID` either way.",
    )
    @inject
    async def send(
        self,
        data: JSONBody[ChatBody],
        identity: FromDishka[Identity],
        scopes: FromDishka[OrgScopes],
        streams: FromDishka[ChatStreams],
        stream_response: Annotated[
            str | None,
            HeaderParameter(
                name="X-Stream-Response",
                required=False,
                schema_extra={"enum": ["true", "false"]},
                description="`false` answers 202 at once instead of streaming (default `true`)",
            ),
        ] = None,
    ) -> Response[Any]:
        streaming = _streaming(stream_response)
        async with scopes.acting_as(identity) as scope:
            caller = await scope.get(Caller)
            started = await (await scope.get(SendChatMessage)).execute(
                command(SendChatMessageCommand.parse, data, caller=caller)
            )
        if streaming:
            chunks = streams.follow(caller.org_id, started.run_id)
            return _event_stream(chunks, started.thread_id)
        return Response(
            ChatAccepted(thread_id=started.thread_id, status="in_progress"),
            status_code=202,
            headers={"X-Thread-ID": started.thread_id},
        )

    @get(
        "/{thread_id:str}/stream",
        responses=errors(400, 403, 404),
        summary="Resume the stream of a running answer",
        description="Replays the running answer from its first chunk, then follows it live; "
        "204 when no answer is running.",
    )
    @inject
    async def resume(
        self,
        thread_id: Annotated[UUID, THREAD_PATH],
        identity: FromDishka[Identity],
        scopes: FromDishka[OrgScopes],
    ) -> Response[Any]:
        async with scopes.acting_as(identity) as scope:
            caller = await scope.get(Caller)
            chunks = await (await scope.get(FollowChatResponse)).execute(
                FollowChatResponseQuery.parse(caller=caller, thread_id=str(thread_id))
            )
        if chunks is None:
            return Response(None, status_code=204, headers={"X-Thread-ID": str(thread_id)})
        return _event_stream(chunks, str(thread_id))

    @post(
        "/{thread_id:str}/cancel",
        status_code=200,
        responses=errors(400, 403, 404),
        summary="Stop a running answer",
    )
    @inject
    async def cancel(
        self,
        thread_id: Annotated[UUID, THREAD_PATH],
        identity: FromDishka[Identity],
        scopes: FromDishka[OrgScopes],
    ) -> CancelResponse:
        async with scopes.acting_as(identity) as scope:
            caller = await scope.get(Caller)
            outcome = await (await scope.get(CancelChatResponse)).execute(
                CancelChatResponseCommand.parse(caller=caller, thread_id=str(thread_id))
            )
        return CancelResponse(
            success=True,
            thread_id=outcome.thread_id,
            cancelled=outcome.cancelled,
            stream_status=None if outcome.stream_status is None else outcome.stream_status.value,
        )

    @post(
        "/{thread_id:str}/approvals",
        status_code=200,
        responses=body_errors(402, 403, 404, 409),
        summary="Approve or deny a tool call the answer paused for",
        description="The conversation's owner answers a `tool-approval-request`. Once every "
        "call the answer paused for is decided, the answer continues as a new run of the same "
        "message (`continued: true`): follow it with `GET /chat/{threadId}/stream`. 404: no "
        "such approval; 409: already answered, the answer still running, or expired (it "
        "counts as denied; denying it is accepted).",
    )
    @inject
    async def approve(
        self,
        thread_id: Annotated[UUID, THREAD_PATH],
        data: JSONBody[ApprovalBody],
        identity: FromDishka[Identity],
        scopes: FromDishka[OrgScopes],
    ) -> ApprovalResponse:
        async with scopes.acting_as(identity) as scope:
            caller = await scope.get(Caller)
            decision = ApprovalDecision.parse(data.approval_id, data.approved, data.reason)
            answered = await (await scope.get(AnswerToolApproval)).execute(
                AnswerToolApprovalCommand(
                    caller=caller, thread_id=str(thread_id), decision=decision
                )
            )
        return ApprovalResponse(
            success=True, thread_id=answered.thread_id, continued=answered.run_id is not None
        )
