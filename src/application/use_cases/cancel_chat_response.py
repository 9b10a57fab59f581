from __future__ import annotations

import asyncio
from dataclasses import dataclass

from application.ports.background_tasks import BackgroundTasks
from application.ports.chat_run_log import ChatRunLog
from application.ports.conversation_repository import ConversationRepository
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.follow_chat_response import visible_conversation
from domain.conversations import StreamStatus, ThreadRequest

WAIT_FOR_STOP = 5.0
POLL_INTERVAL = 0.1


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelChatResponseCommand(ThreadRequest):
    """Which conversation's answer to stop (`ThreadRequest.parse`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelOutcome:
    thread_id: str
    cancelled: bool
    stream_status: StreamStatus | None


class CancelChatResponse:
    """Stop a conversation's running answer.

    Rules: the conversation must be one the caller may see (404 for an unknown or foreign
    one). The running answer is flagged to stop (the process producing it
    sees the flag within moments) and stopped at once when it runs in this process; the call
    waits up to 5 seconds for it to end, and reports the status the answer ended with. What was
    produced before the stop is kept. With nothing running, nothing changes.
    """

    def __init__(
        self,
        conversations: ConversationRepository,
        uow: UnitOfWork,
        tasks: BackgroundTasks,
        runs: ChatRunLog,
    ) -> None:
        self._conversations = conversations
        self._uow = uow
        self._tasks = tasks
        self._runs = runs

    async def execute(self, command: CancelChatResponseCommand) -> CancelOutcome:
        caller = command.caller
        conversation = await visible_conversation(self._conversations, caller, command.thread_id)
        run = await self._conversations.request_cancel(caller.org_id, conversation.thread_id)
        await self._uow.commit()
        if run is None:
            return CancelOutcome(
                thread_id=conversation.thread_id,
                cancelled=False,
                stream_status=conversation.stream_status,
            )
        if self._tasks.cancel(run.id):
            await self._tasks.wait(run.id, WAIT_FOR_STOP)
        status: StreamStatus | None = StreamStatus.IN_PROGRESS
        deadline = asyncio.get_running_loop().time() + WAIT_FOR_STOP
        while True:
            _, status = await self._runs.read(caller.org_id, run.id, after_seq=2**31 - 1)
            if status is None or status.terminal:
                break
            if asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(POLL_INTERVAL)
        return CancelOutcome(
            thread_id=conversation.thread_id,
            cancelled=status is StreamStatus.CANCELLED,
            stream_status=status,
        )
