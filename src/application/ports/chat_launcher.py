from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol


class BackgroundTasks(Protocol):
    """Runs work that must outlive the request that started it (an assistant response).

    A task is not tied to any HTTP connection: a client that goes away stops nothing. At
    shutdown the remaining tasks are cancelled, and each is expected to record that it stopped.
    """

    def spawn(self, name: str, work: Callable[[], Awaitable[None]], *, key: str) -> None:
        """Start `work` now; `key` lets `cancel` find it."""
        ...

    def cancel(self, key: str) -> bool:
        """Cancel the task started with `key`; False when none is running here."""
        ...
