"""Small shared values."""

from __future__ import annotations

from enum import Enum


class Unset(Enum):
    """Marks an optional field the caller did not send, as distinct from an explicit null."""

    UNSET = "UNSET"


UNSET = Unset.UNSET
