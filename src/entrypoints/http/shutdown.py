"""`serve`'s shutdown, bounded: uvicorn's server with a grace for running answers.

uvicorn alone waits for every open connection to close, however long an answer streams, and a
second Ctrl-C (`force_exit`) skips the application's shutdown, so answers were cut without an
ending and their usage was lost with the database pool. `GracefulServer` instead, at the first
SIGTERM or SIGINT: stops accepting connections and closes the idle ones; lets the running
answers and the worker's jobs in hand go on for at most `grace` seconds (`drain`); then has
uvicorn finish the connections left (by then every answer has ended, recorded) within
`CLOSE_SECONDS`, and always runs the application's shutdown, which stops the model runner and
closes the pool after the answers' usage is recorded. A second signal skips what is left of the
grace. The whole stays within the grace plus five seconds.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable
from types import FrameType

import uvicorn

log = logging.getLogger(__name__)

# What uvicorn may still take for the connections left once the answers have ended.
CLOSE_SECONDS = 2

Drain = Callable[[asyncio.Event], Awaitable[None]]
"""Ends the running work within the grace, sooner once the event is set (a second signal)."""


class GracefulServer(uvicorn.Server):
    """`uvicorn.Server` whose shutdown runs `drain` first and never skips the app's shutdown."""

    def __init__(self, config: uvicorn.Config, drain: Drain) -> None:
        super().__init__(config)
        self._drain = drain
        self._hurry = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._captured_signals.append(sig)
        if self.should_exit:
            log.warning("shutdown: a second signal, the grace is skipped")
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._hurry.set)
        else:
            self.should_exit = True

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
