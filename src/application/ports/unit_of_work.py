from __future__ import annotations

from typing import Protocol


class UnitOfWork(Protocol):
    """The transaction a use case runs in.

    Everything the repositories write becomes visible only at `commit`; a use case that
    raises before committing leaves the data as it was. Every transaction is scoped to the
    caller's organization, so a query that forgot its organization filter returns nothing.
    """

    async def commit(self) -> None:
        """Make every write of this unit of work durable, at once."""
        ...

    async def rollback(self) -> None:
        """Discard every uncommitted write."""
        ...
