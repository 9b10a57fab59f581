from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from application.ports.chat_run_log import ChatRunLog
from application.ports.clock import Clock
from application.ports.conversation_repository import ConversationRepository
from application.ports.scheduled_tasks import ScheduledTaskRepository
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.send_chat_message import SendChatMessage, SendChatMessageCommand
from domain.conversations import StreamStatus
from domain.errors import DomainError
from domain.identity import Caller
from domain.schedules import AGENT_GONE, TASK_GONE, RunStatus, ScheduledRun
from domain.spend import SpendCapReached

# A reader of an answer whose producer has been silent this long fails it (as chat readers do).
STALE_AFTER = 30.0
NO_ANSWER = "The agent's answer did not finish."
AWAITING_APPROVAL = (
    "The agent's answer waits for approval of a tool call; its conversation's member can "
    "approve or deny it there."
)
GAVE_UP = "The run was cut short several times (its worker stopped) and was given up."


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecuteScheduledRunCommand:
    org_id: str
    run_id: str


@dataclass(frozen=True, slots=True)
class RunUnderWay:
    """A run whose answer is being produced: wait for the answer (`chat_run_id`, when it was
    started here), then `FinishScheduledRun`."""

    chat_run_id: str | None


class StartScheduledRun:
    """Carry out the first half of one queued run of a scheduled task (the worker's job for
    it); `FinishScheduledRun` records how it ended. The halves are separate so that no database
    connection is held while the agent answers.

    Rules: a run that is no longer queued or running is left alone (a retried job). A run
    whose task was deleted, or whose agent no longer exists, ends `failed` with that reason.
    Otherwise the run is `running` and the task's prompt goes to its agent through the same use
    case as `POST /chat` (non-streaming), in a new conversation of the task's creator titled by
    the task's name: spend caps apply, and a refusal ends the run `failed` with the reason. The
    run keeps the conversation's id. A job retried after its worker died mid-run does not send
    the prompt again: it finishes with the answer already started. The task's `lastRunStatus`
    follows the run, with `lastRunAt` the run's `scheduledFor`, unless a later run was recorded
    since.
    """

    def __init__(
        self,
        tasks: ScheduledTaskRepository,
        agents: AgentRepository,
        send: SendChatMessage,
        uow: UnitOfWork,
        clock: Clock,
    ) -> None:
        self._tasks = tasks
        self._agents = agents
        self._send = send
        self._uow = uow
        self._clock = clock

    async def execute(self, command: ExecuteScheduledRunCommand) -> RunUnderWay | None:
        """The answer under way, or None when the run has ended (or had nothing to do)."""
        org_id = command.org_id
        run = await self._tasks.get_run(org_id, command.run_id, for_update=True)
        if run is None or not run.status.is_active:
            return None
        task = await self._tasks.get(org_id, run.task_id)
        gone = TASK_GONE if task is None else None
        if task is not None and await self._agents.get(org_id, task.agent_id) is None:
            gone = AGENT_GONE
        if task is None or gone is not None:
            await end_run(self._tasks, self._uow, self._clock, run, gone)
            return None
        if run.thread_id is not None:
            return RunUnderWay(None)
        await self._tasks.update_run(
            org_id, run.id, status=RunStatus.RUNNING, started_at=self._clock.now()
        )
        await self._tasks.show_run(run, RunStatus.RUNNING)
        caller = Caller(user_id=task.user_id, org_id=org_id)
        message = [{"role": "user", "parts": [{"type": "text", "text": task.prompt}]}]
        try:
            started = await self._send.execute(
                SendChatMessageCommand.parse(
                    caller=caller, agent_id=task.agent_id, messages=message, title=task.name
                )
            )
        except (SpendCapReached, DomainError) as refused:
            await self._uow.rollback()
            reason = refused.explanation if isinstance(refused, SpendCapReached) else None
            await end_run(self._tasks, self._uow, self._clock, run, reason or refused.message)
            return None
        # Committed with the conversation (`SendChatMessage` commits its unit of work).
        await self._tasks.update_run(
            org_id, run.id, status=RunStatus.RUNNING, thread_id=started.thread_id
        )
        await self._uow.commit()
        return RunUnderWay(started.run_id)


class FinishScheduledRun:
    """Record how a running run of a scheduled task ended, once its answer has.

    Rules: `succeeded` when the conversation's answer completed, `failed` with the answer's
    error otherwise (or, for an answer that paused for a tool call's approval, saying so, since
    no one is there to decide); an answer whose producer has given no sign of life for 30 s is
    failed as stalled first (as any reader does). Returns None while the answer is still under way.
    """

    def __init__(
        self,
        tasks: ScheduledTaskRepository,
        runs: ChatRunLog,
        conversations: ConversationRepository,
        uow: UnitOfWork,
        clock: Clock,
    ) -> None:
        self._tasks = tasks
        self._runs = runs
        self._conversations = conversations
        self._uow = uow
        self._clock = clock

    async def execute(self, command: ExecuteScheduledRunCommand) -> RunStatus | None:
        org_id = command.org_id
        run = await self._tasks.get_run(org_id, command.run_id, for_update=True)
        if run is None or not run.status.is_active:
            return run.status if run is not None else RunStatus.FAILED
        answer = (
            await self._conversations.latest_run(org_id, run.thread_id) if run.thread_id else None
        )
        state = (
            await self._runs.fail_if_stalled(org_id, answer.id, stale_after=STALE_AFTER)
            if answer is not None
            else None
        )
        if state is not None and state.status is StreamStatus.IN_PROGRESS:
            await self._uow.rollback()
            return None
        if state is not None and state.status is StreamStatus.COMPLETED:
            return await end_run(self._tasks, self._uow, self._clock, run, None)
        if state is not None and state.status is StreamStatus.AWAITING_APPROVAL:
            return await end_run(self._tasks, self._uow, self._clock, run, AWAITING_APPROVAL)
        error = (state.error if state is not None else None) or NO_ANSWER
        return await end_run(self._tasks, self._uow, self._clock, run, error)

    async def give_up(self, command: ExecuteScheduledRunCommand) -> None:
        """The run's job will not be tried again (its worker kept dying): `failed`."""
        run = await self._tasks.get_run(command.org_id, command.run_id, for_update=True)
        if run is not None and run.status.is_active:
            await end_run(self._tasks, self._uow, self._clock, run, GAVE_UP)


async def end_run(
    tasks: ScheduledTaskRepository,
    uow: UnitOfWork,
    clock: Clock,
    run: ScheduledRun,
    error: str | None,
) -> RunStatus:
    """End `run`: `succeeded` without an error, `failed` with one; the task follows."""
    status = RunStatus.FAILED if error else RunStatus.SUCCEEDED
    await tasks.update_run(run.org_id, run.id, status=status, error=error, finished_at=clock.now())
    await tasks.show_run(run, status)
    await uow.commit()
    return status
