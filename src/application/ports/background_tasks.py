from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

CANCEL_REQUESTED = "cancel-requested"
"""The reason a task cancelled by `BackgroundTasks.cancel` sees (`CancelledError.args[0]`);
any other cancellation (the process shutting down) carries another reason."""


class BackgroundTasks(Protocol):
    """Runs work that must outlive the request that started it (an assistant response).

    A task is not tied to any HTTP connection: a client that goes away stops nothing. `cancel`
    delivers `CancelledError(CANCEL_REQUESTED)` to the task; at shutdown the remaining tasks
    are cancelled with another reason and given a moment to record that they stopped.
    """

    def spawn(self, name: str, work: Callable[[], Awaitable[None]], *, key: str) -> None:
        """Start `work` now; `key` lets `cancel` and `wait` find it."""
        ...

    def cancel(self, key: str) -> bool:
        """Ask the task started with `key` to stop; False when none is running here. Asking
        again while it stops changes nothing (it may be recording how it ended)."""
        ...

    async def wait(self, key: str, seconds: float) -> bool:
        """Wait up to `seconds` for the task `key` to end; True when it has (or is
        not running here)."""
        ...
