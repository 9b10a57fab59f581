"""`ConversationRepository` on an organization-scoped asyncpg connection.

Same habits as `knowledge_bases`: fixed statements, positional rows, `org_id` in every statement.
Ids are uuids in the database and canonical lower-case strings everywhere else. Writes that
hang off a conversation (messages, runs) select the conversation in the same statement, so a
thread of another organization is never written to, whatever the foreign keys would allow.
A conversation's `updated_at` is its activity time: messages and responses move it, title
changes do not (a background title must not reorder a member's list).
"""

from __future__ import annotations

import uuid
from typing import Any

from adapters.postgres.cancel_listener import CANCEL_CHANNEL
from adapters.postgres.database import OrgConnection
from domain.conversations import (
    CONVERSATION_NOT_FOUND,
    FIRST_TITLE_VERSION,
    ChatRun,
    Conversation,
    ConversationCursor,
    NewConversation,
    StoredMessage,
    StreamStatus,
    TitleSource,
)
from domain.errors import Conflict, NotFound

IN_PROGRESS = StreamStatus.IN_PROGRESS.value
CONVERSATION_COLUMNS = (
    "c.thread_id::text, c.org_id, c.user_id, c.agent_id, c.title, c.title_source, "
    "c.title_version, c.upstream_conversation_id::text, c.stream_status, c.created_at, "
    "c.updated_at"
)
MESSAGE_COLUMNS = "m.id::text, m.thread_id::text, m.role, m.parts, m.created_at"
RUN_COLUMNS = "r.id::text, r.org_id, r.thread_id::text, r.message_id::text, r.status, r.created_at"

INSERT_CONVERSATION = f"""
    INSERT INTO conversations AS c (thread_id, org_id, user_id, agent_id, title, title_source,
        upstream_conversation_id, title_version)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (thread_id) DO NOTHING
    RETURNING {CONVERSATION_COLUMNS}"""
# A new conversation, its first message, the empty answer and its run in one statement (one
# round trip instead of five on the way to the first byte). The two messages are inserted by
# one INSERT in order, so the answer comes after the question in `seq`.
START_CONVERSATION = f"""
    WITH thread AS (
        INSERT INTO conversations (thread_id, org_id, user_id, agent_id, title, title_source,
            upstream_conversation_id, title_version, stream_status)
        VALUES ($2, $1, $3, $4, $5, $6, $7, $8, '{IN_PROGRESS}')
        ON CONFLICT (thread_id) DO NOTHING
        RETURNING thread_id
    ), messages AS (
        INSERT INTO chat_messages AS m (id, org_id, thread_id, role, parts, status)
        SELECT v.id, $1, thread.thread_id, v.role, v.parts, v.status
        FROM thread, (VALUES (1, $9::uuid, 'user', $10::jsonb, NULL::varchar),
            (2, $11::uuid, 'assistant', '[]'::jsonb, '{IN_PROGRESS}')) AS v(n, id, role, parts,
            status)
        ORDER BY v.n
        RETURNING {MESSAGE_COLUMNS}
    ), run AS (
        INSERT INTO chat_runs (id, org_id, thread_id, message_id, status, created_at,
            heartbeat_at)
        SELECT $12, $1, thread.thread_id, $11, '{IN_PROGRESS}', clock_timestamp(),
            clock_timestamp()
        FROM thread
    )
    SELECT * FROM messages WHERE role = 'user'"""
GET_CONVERSATION = (
    f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.org_id = $1 AND c.thread_id = $2"
)
# Newest activity first; the order and the row comparison match `ix_conversations_member`.
LIST_FIRST_PAGE = f"""
    SELECT {CONVERSATION_COLUMNS} FROM conversations c
    WHERE c.org_id = $1 AND c.user_id = $2 AND ($3::bigint IS NULL OR c.agent_id = $3)
    ORDER BY c.updated_at DESC, c.thread_id DESC LIMIT $4"""
LIST_NEXT_PAGE = f"""
    SELECT {CONVERSATION_COLUMNS} FROM conversations c
    WHERE c.org_id = $1 AND c.user_id = $2 AND ($3::bigint IS NULL OR c.agent_id = $3)
      AND (c.updated_at, c.thread_id) < ($5::timestamptz, $6::uuid)
    ORDER BY c.updated_at DESC, c.thread_id DESC LIMIT $4"""
DELETE_CONVERSATION = "DELETE FROM conversations WHERE org_id = $1 AND thread_id = $2"
RENAME = f"""
    UPDATE conversations c SET title = $3, title_source = '{TitleSource.RENAMED.value}',
        title_version = c.title_version + 1
    WHERE c.org_id = $1 AND c.thread_id = $2
    RETURNING {CONVERSATION_COLUMNS}"""
SET_GENERATED_TITLE = f"""
    UPDATE conversations SET title = $3, title_source = '{TitleSource.GENERATED.value}',
        title_version = title_version + 1
    WHERE org_id = $1 AND thread_id = $2 AND title_source = '{TitleSource.FALLBACK.value}'
      AND title_version = $4"""
ADD_MESSAGE = f"""
    WITH thread AS (
        UPDATE conversations SET updated_at = now()
        WHERE org_id = $1 AND thread_id = $2 RETURNING thread_id
    )
    INSERT INTO chat_messages AS m (id, org_id, thread_id, role, parts)
    SELECT $3, $1, thread.thread_id, $4, $5 FROM thread
    RETURNING {MESSAGE_COLUMNS}"""
LIST_MESSAGES = (
    f"SELECT {MESSAGE_COLUMNS} FROM chat_messages m "
    "WHERE m.org_id = $1 AND m.thread_id = $2 ORDER BY m.seq"
)
FIRST_USER_MESSAGE = (
    f"SELECT {MESSAGE_COLUMNS} FROM chat_messages m "
    "WHERE m.org_id = $1 AND m.thread_id = $2 AND m.role = 'user' ORDER BY m.seq LIMIT 1"
)
# The conversation shows a run in progress; its message ($4) is the CTE `message`.
RUN_OF_THREAD = f"""
    WITH thread AS (
        UPDATE conversations SET stream_status = '{IN_PROGRESS}', updated_at = now()
        WHERE org_id = $1 AND thread_id = $2 RETURNING thread_id
    ), message AS ({{message}})"""
# The run ($3) of the CTE `message`. Its creation time is the clock's, not the
# transaction's: two runs of one thread started in one transaction still have an order.
NEW_RUN = f"""
    INSERT INTO chat_runs AS r (id, org_id, thread_id, message_id, status, created_at,
        heartbeat_at)
    SELECT $3, $1, message.thread_id, message.id, '{IN_PROGRESS}', clock_timestamp(),
        clock_timestamp()
    FROM message
    RETURNING {RUN_COLUMNS}"""
START_RUN = (
    RUN_OF_THREAD.format(
        message=f"""
        INSERT INTO chat_messages (id, org_id, thread_id, role, parts, status)
        SELECT $4, $1, thread.thread_id, 'assistant', '[]'::jsonb, '{IN_PROGRESS}' FROM thread
        RETURNING id, thread_id"""
    )
    + NEW_RUN
)
# $5 the parts of the assistant message $4 that the run continues.
RESUME_RUN = (
    RUN_OF_THREAD.format(
        message=f"""
        UPDATE chat_messages m SET parts = $5, status = '{IN_PROGRESS}', error = NULL,
            updated_at = now()
        FROM thread
        WHERE m.org_id = $1 AND m.id = $4 AND m.thread_id = thread.thread_id
          AND m.role = 'assistant'
        RETURNING m.id, m.thread_id"""
    )
    + NEW_RUN
)
SET_MESSAGE_PARTS = """
    UPDATE chat_messages SET parts = $3, status = coalesce($4, status), updated_at = now()
    WHERE org_id = $1 AND id = $2
    RETURNING id"""
RUNNING_RUN = f"""
    SELECT {RUN_COLUMNS} FROM chat_runs r
    WHERE r.org_id = $1 AND r.thread_id = $2 AND r.status = '{IN_PROGRESS}'
    ORDER BY r.created_at DESC LIMIT 1"""
LATEST_RUN = f"""
    SELECT {RUN_COLUMNS} FROM chat_runs r
    WHERE r.org_id = $1 AND r.thread_id = $2 ORDER BY r.created_at DESC LIMIT 1"""
# The notification (delivered at commit) lets the process producing the run stop it at once.
REQUEST_CANCEL = f"""
    WITH flagged AS (
        UPDATE chat_runs r SET cancel_requested = true
        WHERE r.org_id = $1 AND r.thread_id = $2 AND r.status = '{IN_PROGRESS}'
        RETURNING r.*)
    SELECT {RUN_COLUMNS}, pg_notify('{CANCEL_CHANNEL}', r.id::text) FROM flagged r"""

_STREAM_STATUS = {status.value: status for status in StreamStatus}
_TITLE_SOURCE = {source.value: source for source in TitleSource}


def _conversation(r: Any) -> Conversation:
    return Conversation(
        thread_id=r[0], org_id=r[1], user_id=r[2], agent_id=r[3], title=r[4],
        title_source=_TITLE_SOURCE[r[5]], title_version=r[6], upstream_conversation_id=r[7],
        stream_status=_STREAM_STATUS[r[8]] if r[8] is not None else None, created_at=r[9],
        updated_at=r[10],
    )  # fmt: skip


def _message(r: Any) -> StoredMessage:
    return StoredMessage(id=r[0], thread_id=r[1], role=r[2], parts=r[3], created_at=r[4])


def _run(r: Any) -> ChatRun:
    return ChatRun(
        id=r[0], org_id=r[1], thread_id=r[2], message_id=r[3], status=_STREAM_STATUS[r[4]],
        created_at=r[5],
    )  # fmt: skip


def _uuid(value: str) -> uuid.UUID:
    return uuid.UUID(value)


class PgConversationRepository:
    """`ConversationRepository` in Postgres."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def add(self, new: NewConversation) -> Conversation:
        rows = await self._db.fetch_in_transaction(
            INSERT_CONVERSATION, _uuid(new.thread_id), new.org_id, new.user_id, new.agent_id,
            new.title, new.title_source.value,
            _uuid(new.upstream_conversation_id) if new.upstream_conversation_id else None,
            FIRST_TITLE_VERSION,
        )  # fmt: skip
        if not rows:
            raise Conflict("A conversation with this threadId already exists")
        return _conversation(rows[0])

    async def start(
        self,
        new: NewConversation,
        *,
        message_id: str,
        parts: list[dict[str, Any]],
        run_id: str,
        answer_id: str,
    ) -> StoredMessage:
        rows = await self._db.fetch(
            START_CONVERSATION, new.org_id, _uuid(new.thread_id), new.user_id, new.agent_id,
            new.title, new.title_source.value,
            _uuid(new.upstream_conversation_id) if new.upstream_conversation_id else None,
            FIRST_TITLE_VERSION, _uuid(message_id), parts, _uuid(answer_id), _uuid(run_id),
        )  # fmt: skip
        if not rows:
            raise Conflict("A conversation with this threadId already exists")
        return _message(rows[0])

    async def get(
        self, org_id: str, thread_id: str, *, for_update: bool = False
    ) -> Conversation | None:
        if for_update:
            rows = await self._db.fetch_in_transaction(
                GET_CONVERSATION + " FOR UPDATE", org_id, _uuid(thread_id)
            )
        else:
            rows = await self._db.fetch(GET_CONVERSATION, org_id, _uuid(thread_id))
        return _conversation(rows[0]) if rows else None

    async def list_for_user(
        self,
        org_id: str,
        user_id: str,
        *,
        agent_id: int | None,
        limit: int,
        after: ConversationCursor | None,
    ) -> list[Conversation]:
        if after is None:
            rows = await self._db.fetch(LIST_FIRST_PAGE, org_id, user_id, agent_id, limit)
        else:
            rows = await self._db.fetch(
                LIST_NEXT_PAGE, org_id, user_id, agent_id, limit, after.updated_at,
                _uuid(after.thread_id),
            )  # fmt: skip
        return [_conversation(r) for r in rows]

    async def delete(self, org_id: str, thread_id: str) -> bool:
        status = await self._db.execute(DELETE_CONVERSATION, org_id, _uuid(thread_id))
        return status != "DELETE 0"

    async def rename(self, org_id: str, thread_id: str, title: str | None) -> Conversation | None:
        rows = await self._db.fetch_in_transaction(RENAME, org_id, _uuid(thread_id), title)
        return _conversation(rows[0]) if rows else None

    async def set_generated_title(
        self, org_id: str, thread_id: str, title: str, expected_version: int
    ) -> bool:
        status = await self._db.execute(
            SET_GENERATED_TITLE, org_id, _uuid(thread_id), title, expected_version
        )
        return status != "UPDATE 0"

    async def add_message(
        self,
        org_id: str,
        thread_id: str,
        *,
        message_id: str,
        role: str,
        parts: list[dict[str, Any]],
    ) -> StoredMessage:
        rows = await self._db.fetch_in_transaction(
            ADD_MESSAGE, org_id, _uuid(thread_id), _uuid(message_id), role, parts
        )
        if not rows:
            raise NotFound(CONVERSATION_NOT_FOUND)
        return _message(rows[0])

    async def messages(self, org_id: str, thread_id: str) -> list[StoredMessage]:
        return [_message(r) for r in await self._db.fetch(LIST_MESSAGES, org_id, _uuid(thread_id))]

    async def first_user_message(self, org_id: str, thread_id: str) -> StoredMessage | None:
        rows = await self._db.fetch(FIRST_USER_MESSAGE, org_id, _uuid(thread_id))
        return _message(rows[0]) if rows else None

    async def start_run(
        self, org_id: str, thread_id: str, *, run_id: str, message_id: str
    ) -> ChatRun:
        rows = await self._db.fetch_in_transaction(
            START_RUN, org_id, _uuid(thread_id), _uuid(run_id), _uuid(message_id)
        )
        if not rows:
            raise NotFound(CONVERSATION_NOT_FOUND)
        return _run(rows[0])

    async def resume_run(
        self,
        org_id: str,
        thread_id: str,
        *,
        run_id: str,
        message_id: str,
        parts: list[dict[str, Any]],
    ) -> ChatRun | None:
        rows = await self._db.fetch_in_transaction(
            RESUME_RUN, org_id, _uuid(thread_id), _uuid(run_id), _uuid(message_id), parts
        )
        return _run(rows[0]) if rows else None

    async def set_message_parts(
        self,
        org_id: str,
        message_id: str,
        parts: list[dict[str, Any]],
        status: StreamStatus | None = None,
    ) -> bool:
        rows = await self._db.fetch_in_transaction(
            SET_MESSAGE_PARTS, org_id, _uuid(message_id), parts, status and status.value
        )
        return bool(rows)

    async def running_run(self, org_id: str, thread_id: str) -> ChatRun | None:
        rows = await self._db.fetch(RUNNING_RUN, org_id, _uuid(thread_id))
        return _run(rows[0]) if rows else None

    async def latest_run(self, org_id: str, thread_id: str) -> ChatRun | None:
        rows = await self._db.fetch(LATEST_RUN, org_id, _uuid(thread_id))
        return _run(rows[0]) if rows else None

    async def request_cancel(self, org_id: str, thread_id: str) -> ChatRun | None:
        rows = await self._db.fetch_in_transaction(REQUEST_CANCEL, org_id, _uuid(thread_id))
        return _run(rows[0]) if rows else None
