"""The application's connection pool and its organization-scoped connections (asyncpg).

Every pooled connection acts as the app role (owns no table, cannot bypass row-level
security). Every checkout, whoever asks, is scoped by the pool before it is handed out (the
pool's `setup`): `app.org_id` for the whole session, to the organization `org_connection` asks
for and to none for any other caller, with the scope's other settings, so every statement sees
only that organization's rows, inside a transaction or not. A connection `org_connection` gives
back holds no session state but that scope (see `OrgConnection.raw`), so it returns to the pool
without asyncpg's reset round trip (anything left open is still rolled back); any other is
reset in full (`RESET ALL`, advisory locks, LISTEN, cursors). Reads run without a transaction;
the first write or lock opens one, and nothing is kept unless the use case commits.

SQLAlchemy is used for the schema (models, Alembic); the request path talks to asyncpg
directly because SQLAlchemy's transaction and result layers cost more than the queries.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
from pgvector.asyncpg import register_vector

log = logging.getLogger(__name__)

DEFAULT_APP_ROLE = "agent_platform_app"
_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_json_encoder = msgspec.json.Encoder()
# The organization, pgvector's iterative index scans (so that a search filtered to one
# organization's knowledge bases still finds its top k) and whether commits wait for the WAL
# flush: session-level, all three set on every checkout, so none outlives the checkout.
SCOPE = (
    "SELECT set_config('app.org_id', $1, false) AS org_id, "
    "set_config('hnsw.iterative_scan', 'relaxed_order', false) AS iterative_scan, "
    "set_config('synchronous_commit', $2, false) AS synchronous_commit"
)
# As SCOPE, for a member's request: the same round trip also reads when the member was last
# removed from the organization. The read is a sub-query on the scope's own output (`OFFSET 0`
# keeps that a separate step), so it runs once `app.org_id` is set, and row-level security
# lets it see the organization's row; a plain sub-query might run first. It replaces
# `ap_member_removed_at` (migration 0008), a plpgsql function that cost the database twice as
# much per request; the function stays for servers of earlier releases during an upgrade.
SCOPE_MEMBER = " ".join(
    (
        "SELECT s.org_id, s.iterative_scan, s.synchronous_commit,",
        "(SELECT m.removed_at FROM membership_removals m",
        "WHERE m.org_id = s.org_id AND m.user_id = $3) AS removed_at",
        f"FROM ({SCOPE} OFFSET 0) s",
    )
)


@dataclass(slots=True)
class _Scope:
    """What `org_connection` asks of the checkout it is about to make."""

    org_id: str
    member: str | None
    synchronous_commit: bool
    removed_at: datetime | None = None


# Set by `org_connection` around its own checkout and release only, so that the pool's hooks
# (which run in the caller's task) know whose they are; any other checkout sees None.
_checkout: ContextVar[_Scope | None] = ContextVar("ap_checkout", default=None)
_scoped_release: ContextVar[bool] = ContextVar("ap_scoped_release", default=False)


def asyncpg_dsn(url: str) -> str:
    """A libpq-style DSN from a SQLAlchemy or plain Postgres URL."""
    for prefix in ("postgresql+asyncpg://", "postgresql+psycopg://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix) :]
    return url


def _encode_json(value: Any) -> str:
    # asyncpg's convention, which libraries sharing the connection (pgqueuer) rely on: a str
    # is JSON text already. Our own columns are bound as dicts and lists.
    if isinstance(value, str):
        return value
    return _json_encoder.encode(value).decode()


class DatabaseUnavailable(Exception):
    """No connection to the database could be had: it is down, restarting or refusing
    connections. Transient; the pool connects again on the next checkout once it is back."""


CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a new connection (asyncpg's default is 60): a request fails fast while
the database cannot be reached instead of holding its client."""
# What a lost or refused connection raises: the socket's own errors (refused, no such socket
# file, timed out), and the server saying it is starting, stopping or has ended the session.
CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    OSError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.TooManyConnectionsError,
)


class ConnectionEnded(DatabaseUnavailable):
    """The pooled connection a checkout was about to hand out had been ended by the server
    while it was idle (a shutdown, `pg_terminate_backend`): the end's error had reached asyncpg
    and the socket's close had not, so the scope statement found it mid-error
    (`InternalClientError`, "another operation is in progress"). The pool closes it."""


async def scope_checkout(connection: Any, scope: _Scope | None, server_commit: str) -> None:
    """The pool's `setup`: scope a checkout to `scope`'s organization (none without one), with
    its settings, and read the member's removal time when it names a member."""
    try:
        if scope is None:
            await connection.execute(SCOPE, "", server_commit)
            return
        commit = server_commit if scope.synchronous_commit else "off"
        if scope.member is not None and scope.org_id:
            row = await connection.fetchrow(SCOPE_MEMBER, scope.org_id, commit, scope.member)
            scope.removed_at = row[3] if row is not None else None
        else:
            await connection.execute(SCOPE, scope.org_id, commit)
    except asyncpg.exceptions.InternalClientError as error:
        raise ConnectionEnded(type(error).__name__) from error


async def create_pool(url: str, *, app_role: str | None, size: int) -> asyncpg.Pool:
    """A pool of `size` connections, each switched to `app_role` and decoding JSON with
    msgspec; `app_role=None` keeps the login role (tests that inspect as the owner). Every
    checkout is scoped before it is handed out (see the module's docstring)."""
    if app_role is not None and not _ROLE_NAME.match(app_role):
        raise ValueError(f"invalid database role name: {app_role!r}")
    server_default: dict[str, str] = {}

    async def init(connection: asyncpg.Connection) -> None:
        for kind in ("json", "jsonb"):
            await connection.set_type_codec(
                kind,
                encoder=_encode_json,
                decoder=msgspec.json.decode,
                schema="pg_catalog",
            )
        if app_role is not None:
            await connection.execute(f'SET ROLE "{app_role}"')
        await register_vector(connection)
        if "synchronous_commit" not in server_default:
            server_default["synchronous_commit"] = await connection.fetchval(
                "SHOW synchronous_commit"
            )

    async def setup(connection: Any) -> None:
        await scope_checkout(connection, _checkout.get(), server_default["synchronous_commit"])

    async def reset(connection: asyncpg.Connection) -> None:
        # asyncpg has rolled back anything left open and dropped the listener callbacks.
        if _scoped_release.get():
            return
        await connection.execute(connection.get_reset_query())

    pool: asyncpg.Pool = await asyncpg.create_pool(
        asyncpg_dsn(url),
        min_size=1,
        max_size=size,
        init=init,
        setup=setup,
        reset=reset,
        timeout=CONNECT_TIMEOUT,
    )
    return pool


class FairGate:
    """Admits at most `size` requests to the database at once, first come first served.

    A pool hands a released connection to whichever task asks next, so under load a waiting
    request can lose its turn again and again (seconds of tail latency). Queuing here, in
    front of a pool of the same size, keeps every wait in arrival order.
    """

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def __aenter__(self) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()
            else:
                self._waiters.remove(waiter)
            raise

    async def __aexit__(self, *_: object) -> None:
        self._release()

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class OrgConnection:
    """One pooled connection scoped to an organization; the `UnitOfWork` of a request."""

    def __init__(self, connection: asyncpg.Connection, removed_at: datetime | None = None) -> None:
        self._connection = connection
        self._transaction: Any = None
        self.removed_at = removed_at
        """When the scope's member was last removed from the organization (see `member`)."""

    @property
    def raw(self) -> asyncpg.Connection:
        """The connection itself, for what this class does not wrap (executemany, a
        transaction of the caller's own). It must leave no session state behind (no `SET`
        without `LOCAL`, LISTEN, session advisory lock or held cursor): it goes back to the
        pool without a reset, and only its scope is set anew at the next checkout."""
        return self._connection

    @property
    def in_transaction(self) -> bool:
        return self._transaction is not None

    async def begin(self) -> None:
        """Open a transaction unless one is open; writes and locks call this first."""
        if self._transaction is None:
            transaction = self._connection.transaction()
            await transaction.start()
            self._transaction = transaction

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await self._connection.fetch(sql, *args)
        return rows

    async def fetch_in_transaction(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        await self.begin()
        return await self.fetch(sql, *args)

    async def execute(self, sql: str, *args: Any) -> str:
        await self.begin()
        status: str = await self._connection.execute(sql, *args)
        return status

    async def commit(self) -> None:
        if self._transaction is not None:
            transaction, self._transaction = self._transaction, None
            await transaction.commit()

    async def rollback(self) -> None:
        if self._transaction is not None:
            transaction, self._transaction = self._transaction, None
            await transaction.rollback()


class org_connection:  # noqa: N801 - used as a function: `async with org_connection(...)`
    """A connection that sees only `org_id`'s rows (none when it is None) until released;
    whatever was not committed is rolled back. `synchronous_commit=False` lets its commits
    return before their WAL is on disk. The pool scopes the connection as it hands it out, in
    the same round trip as any other checkout's, and takes it back without a reset (see the
    module's docstring); the gate's place is given back once it is in the pool. With `member`
    (a user id), the connection also knows when that member was last removed from the
    organization (`OrgConnection.removed_at`).

    A class rather than an `asynccontextmanager` generator: every request enters one, and
    the generator's machinery cost more than the checkout's own Python.
    """

    __slots__ = ("_admission", "_connection", "_pool", "_scope", "_scoped")

    def __init__(
        self,
        pool: asyncpg.Pool,
        org_id: str | None,
        gate: FairGate | None = None,
        *,
        synchronous_commit: bool = True,
        member: str | None = None,
    ) -> None:
        self._pool = pool
        self._admission: FairGate | _NoGate = gate or _NO_GATE
        self._scope = _Scope(org_id or "", member, synchronous_commit)
        self._connection: Any = None
        self._scoped: OrgConnection | None = None

    async def __aenter__(self) -> OrgConnection:
        if self._scoped is not None:
            raise RuntimeError("org_connection is not reentrant")
        admission = self._admission
        await admission.__aenter__()
        try:
            token = _checkout.set(self._scope)
            try:
                self._connection = await _acquire(self._pool)
            finally:
                _checkout.reset(token)
        except BaseException as error:
            await admission.__aexit__(None, None, None)
            if isinstance(error, CONNECTION_ERRORS):
                raise DatabaseUnavailable(type(error).__name__) from error
            raise
        self._scoped = OrgConnection(self._connection, self._scope.removed_at)
        return self._scoped

    async def __aexit__(self, error_type: type[BaseException] | None, *_: object) -> None:
        assert self._scoped is not None
        clean = False
        try:
            await self._scoped.rollback()
            clean = error_type is None
        finally:
            # Only a block that ended without an error skips the reset: after one, the
            # connection may be half-dead (a server shutting down answers a statement, then
            # closes), and asyncpg's full reset is what finds that out and closes it instead of
            # pooling it.
            released = _scoped_release.set(clean)
            try:
                await self._pool.release(self._connection)
            except Exception:
                # asyncpg closes a connection it could not take back; the pool opens another.
                log.warning(
                    "a database connection could not be returned to the pool", exc_info=True
                )
            finally:
                _scoped_release.reset(released)
                await self._admission.__aexit__(None, None, None)


async def _acquire(pool: asyncpg.Pool) -> Any:
    """A connection from the pool; one more checkout when the first finds its connection ended
    (`ConnectionEnded`): the next opens a new one, or finds the database gone."""
    try:
        return await pool.acquire()
    except ConnectionEnded:
        return await pool.acquire()


class _NoGate:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *_: object) -> None:
        return None


_NO_GATE = _NoGate()
