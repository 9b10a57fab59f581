"""A checkout whose scope statement finds the pooled connection ended by the server."""

from __future__ import annotations

import asyncpg
import pytest

from adapters.postgres.database import DatabaseUnavailable, org_connection

ENDED = "cannot switch to state 12; another operation (2) is in progress"


class Pool:
    """Hands out `broken` connections whose setup fails as asyncpg's does, then good ones."""

    def __init__(self, broken: int) -> None:
        self.broken = broken
        self.acquired = 0
        self.released: list[object] = []

    async def acquire(self) -> object:
        self.acquired += 1
        if self.broken:
            self.broken -= 1
            raise asyncpg.exceptions.InternalClientError(ENDED)
        return object()

    async def release(self, connection: object) -> None:
        self.released.append(connection)


async def test_one_connection_ended_while_idle_costs_one_more_checkout():
    pool = Pool(broken=1)
    async with org_connection(pool, "org_a") as db:  # type: ignore[arg-type]
        connection = db.raw
    assert pool.acquired == 2
    assert pool.released == [connection]


async def test_two_in_a_row_are_the_database_going_away():
    pool = Pool(broken=2)
    with pytest.raises(DatabaseUnavailable) as raised:
        async with org_connection(pool, "org_a"):  # type: ignore[arg-type]
            pass
    assert isinstance(raised.value.__cause__, asyncpg.exceptions.InternalClientError)
    assert (pool.acquired, pool.released) == (2, [])
