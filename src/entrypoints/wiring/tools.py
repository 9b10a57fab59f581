"""Tool servers: the repository on the request's connection, the secret box that seals their
header values, the connector that talks to them, and the use cases."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from dishka import Provider, Scope, provide, provide_all

from adapters.postgres.tool_servers import PgToolServerRepository
from adapters.secrets.fernet_box import FernetSecretBox, load_or_create_key
from adapters.tools.connector import HttpToolConnector
from application.ports.audit_log import AuditLog
from application.ports.secret_box import SecretBox
from application.ports.tool_connector import ToolConnector
from application.ports.tool_server_repository import ToolServerRepository
from application.ports.unit_of_work import UnitOfWork
from application.tool_discovery import ToolServerSession, ToolServerSessions
from application.use_cases.create_tool_server import CreateToolServer
from application.use_cases.delete_tool_server import DeleteToolServer
from application.use_cases.list_tool_servers import ListToolServers
from application.use_cases.refresh_tool_server import RefreshToolServer
from application.use_cases.update_tool_server import UpdateToolServer
from domain.identity import Caller
from entrypoints.config import Settings
from entrypoints.wiring.chat import OrgScopes

log = logging.getLogger(__name__)
KEY_FILE = "secrets.key"


class ToolProvider(Provider):
    """Everything behind `/tools`, and what the chat's tools of tool servers need."""

    scope = Scope.REQUEST

    servers = provide(PgToolServerRepository, provides=ToolServerRepository)
    use_cases = provide_all(ListToolServers, DeleteToolServer)
    # No request connection: they talk to tool servers between short units of work.
    discovering = provide_all(
        CreateToolServer, UpdateToolServer, RefreshToolServer, scope=Scope.APP
    )

    @provide(scope=Scope.APP)
    def sessions(self, scopes: OrgScopes) -> ToolServerSessions:
        return tool_server_sessions(scopes)

    @provide(scope=Scope.APP)
    def secret_box(self, settings: Settings) -> SecretBox:
        return FernetSecretBox(settings.tools.secrets_key or development_key(settings))

    @provide(scope=Scope.APP)
    async def connector(self, settings: Settings) -> AsyncIterator[ToolConnector]:
        """One connection pool for the app's life, closed with the container."""
        connector = HttpToolConnector(
            allowed_hosts=settings.tools.allowed_hosts, timeout=settings.tools.timeout
        )
        try:
            yield connector
        finally:
            await connector.aclose()


def tool_server_sessions(scopes: OrgScopes) -> ToolServerSessions:
    """`ToolServerSessions` on short scopes: one connection per read or audit entry, returned
    before a call to a tool server, which may take its whole timeout."""

    @asynccontextmanager
    async def session(caller: Caller) -> AsyncIterator[ToolServerSession]:
        async with scopes.acting_for(caller) as scope:
            yield ToolServerSession(
                servers=await scope.get(ToolServerRepository),
                audit=await scope.get(AuditLog),
                uow=await scope.get(UnitOfWork),
            )

    return session


def development_key(settings: Settings) -> str:
    """Without `AP_SECRETS_KEY`: a key generated once and kept in the data directory (mode
    0600), like the development signing keys. A deployment whose servers do not share that
    directory must set `AP_SECRETS_KEY`, or each would seal with a key the others lack."""
    path = settings.data_dir.resolve() / KEY_FILE
    if not settings.dev_identity:
        log.warning(
            "AP_SECRETS_KEY is not set: tool server header values are sealed with the key kept "
            "in %s; set AP_SECRETS_KEY when several servers share the database",
            path,
        )
    return load_or_create_key(path)
