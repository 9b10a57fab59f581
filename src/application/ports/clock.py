from __future__ import annotations

from datetime import datetime
from typing import Protocol


class Clock(Protocol):
    """The current time, so that expiry rules can be tested without waiting."""

    def now(self) -> datetime:
        """An aware UTC datetime."""
        ...
