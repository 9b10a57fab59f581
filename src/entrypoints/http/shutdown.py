"""`serve`'s shutdown, bounded: uvicorn's server with a grace for running answers.

uvicorn alone waits for every open connection to close, however long an answer streams, and a
second Ctrl-C (`force_exit`) skips the application's shutdown, so answers were cut without an
ending and their usage was lost with the database pool. `GracefulServer` instead, at the first
SIGTERM or SIGINT: stops accepting connections and closes the idle ones; lets the running
answers and the worker's jobs in hand go on for at most `grace` seconds (`drain`); then has
uvicorn finish the connections left (by then every answer has ended, recorded) within
`CLOSE_SECONDS`, and always runs the application's shutdown, which stops the model runner and
closes the pool after the answers' usage is recorded. A second signal skips what is left of the
grace. The whole stays within the grace plus five seconds: a watchdog ends the process just
before, whatever still hangs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from types import FrameType

import uvicorn

log = logging.getLogger(__name__)

# What uvicorn may still take for the connections left once the answers have ended.
CLOSE_SECONDS = 2
# The contract's bound is the grace plus 5 s; a process still there just before is ended.
OVERDUE_AFTER_GRACE = 4.8

Drain = Callable[[asyncio.Event], Awaitable[None]]
"""Ends the running work within the grace, sooner once the event is set (a second signal)."""


class GracefulServer(uvicorn.Server):
    """`uvicorn.Server` whose shutdown runs `drain` first and never skips the app's shutdown."""

    def __init__(self, config: uvicorn.Config, drain: Drain, grace: float) -> None:
        super().__init__(config)
        self._drain = drain
        self._grace = grace
        self._hurry = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # A signal handler: no logging here (a write it interrupts would be re-entered).
        self._captured_signals.append(sig)
        if not self.should_exit:
            self.should_exit = True
            threading.Thread(target=self._watchdog, name="shutdown-watchdog", daemon=True).start()
        elif self._loop is not None:
            self._loop.call_soon_threadsafe(self._skip_grace)

    def _skip_grace(self) -> None:
        log.warning("shutdown.grace_skipped")
        self._hurry.set()

    def _watchdog(self) -> None:
        """The bound, whatever hangs: past it the process ends at once (an embedded PostgreSQL
        left running is adopted by the next `serve`)."""
        time.sleep(self._grace + OVERDUE_AFTER_GRACE)
        os.write(2, b"shutdown.overdue: exiting now\n")
        os._exit(1)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        # Idle keep-alive connections close now; busy ones after their response.
        for connection in list(self.server_state.connections):
            connection.shutdown()
        await self._drain(self._hurry)
        self.config.timeout_graceful_shutdown = CLOSE_SECONDS
        self.force_exit = False
        await super().shutdown()
