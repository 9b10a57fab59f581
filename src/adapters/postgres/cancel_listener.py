"""Cancels reach the process producing an answer through Postgres LISTEN/NOTIFY.

`POST /chat/{threadId}/cancel` may land on any server process. It flags the run and sends a
notification on `CANCEL_CHANNEL` with the run id, delivered when its transaction commits; every
process listens on one dedicated connection and stops the run if it is producing it. The flag
stays the source of truth: a process that missed the notification (its listener was
reconnecting) still sees the flag at the run's next store or heartbeat.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

from adapters.postgres.database import asyncpg_dsn

CANCEL_CHANNEL = "ap_chat_cancel"
RECONNECT_DELAY = 2.0

log = logging.getLogger(__name__)


class PgCancelListener:
    """Calls `on_cancel(run_id)` for every cancel notification, reconnecting when the
    connection drops."""

    def __init__(self, url: str, on_cancel: Callable[[str], object]) -> None:
        self._dsn = asyncpg_dsn(url)
        self._on_cancel = on_cancel
        self._connection: asyncpg.Connection | None = None
        self._reconnect: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        connection = await asyncpg.connect(self._dsn)
        await connection.add_listener(CANCEL_CHANNEL, self._notified)
        connection.add_termination_listener(self._terminated)
        self._connection = connection

    def _notified(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        self._on_cancel(payload)

    def _terminated(self, _connection: Any) -> None:
        self._connection = None
        if not self._closed and self._reconnect is None:
            self._reconnect = asyncio.get_running_loop().create_task(self._reconnect_loop())

    async def _reconnect_loop(self) -> None:
        try:
            while not self._closed:
                await asyncio.sleep(RECONNECT_DELAY)
                try:
                    await self.start()
                    return
                except (OSError, asyncpg.PostgresError):
                    log.warning("cancel listener: reconnect failed", exc_info=True)
        finally:
            self._reconnect = None

    @property
    def listening(self) -> bool:
        return self._connection is not None and not self._connection.is_closed()

    async def stop(self) -> None:
        self._closed = True
        if self._reconnect is not None:
            self._reconnect.cancel()
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.close()
