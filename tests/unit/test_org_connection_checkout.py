"""A checkout whose scope statement finds the pooled connection ended by the server."""

from __future__ import annotations

import asyncpg
import pytest

from adapters.postgres.database import (
    ConnectionEnded,
    DatabaseUnavailable,
    _Scope,
    org_connection,
    scope_checkout,
)

ENDED = "cannot switch to state 12; another operation (2) is in progress"


class EndedConnection:
    """What asyncpg does with a connection that read the server's end but not the close."""

    async def execute(self, *_: object) -> str:
        raise asyncpg.exceptions.InternalClientError(ENDED)

    async def fetchrow(self, *_: object) -> None:
        raise asyncpg.exceptions.InternalClientError(ENDED)


@pytest.mark.parametrize(
    "scope",
    [None, _Scope("org_a", None, True), _Scope("org_a", "user_1", True)],
    ids=["no-organization", "organization", "member"],
)
async def test_the_scope_statement_on_an_ended_connection_is_a_connection_ended(scope):
    with pytest.raises(ConnectionEnded) as raised:
        await scope_checkout(EndedConnection(), scope, "on")
    assert isinstance(raised.value, DatabaseUnavailable)  # a 503, as any lost connection
    assert isinstance(raised.value.__cause__, asyncpg.exceptions.InternalClientError)


class Pool:
    """Hands out `ended` connections (its setup raising as `scope_checkout` does), then good
    ones."""

    def __init__(self, ended: int) -> None:
        self.ended = ended
        self.acquired = 0
        self.released: list[object] = []

    async def acquire(self) -> object:
        self.acquired += 1
        if self.ended:
            self.ended -= 1
            raise ConnectionEnded("InternalClientError")
        return object()

    async def release(self, connection: object) -> None:
        self.released.append(connection)


async def test_one_connection_ended_while_idle_costs_one_more_checkout():
    pool = Pool(ended=1)
    async with org_connection(pool, "org_a") as db:  # type: ignore[arg-type]
        connection = db.raw
    assert pool.acquired == 2
    assert pool.released == [connection]


async def test_two_in_a_row_are_the_database_going_away():
    pool = Pool(ended=2)
    with pytest.raises(DatabaseUnavailable):
        async with org_connection(pool, "org_a"):  # type: ignore[arg-type]
            pass
    assert (pool.acquired, pool.released) == (2, [])


async def test_a_checkout_is_entered_once():
    pool = Pool(ended=0)
    checkout = org_connection(pool, "org_a")  # type: ignore[arg-type]
    async with checkout as db:
        with pytest.raises(RuntimeError, match="not reentrant"):
            await checkout.__aenter__()
        connection = db.raw
    assert (pool.acquired, pool.released) == (1, [connection])
