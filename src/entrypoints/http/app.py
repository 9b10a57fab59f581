"""The Litestar application factory."""

from __future__ import annotations

from typing import Any

import asyncpg
from dishka import AsyncContainer, Provider
from litestar import Litestar
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import ScalarRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.types import ASGIApp

from adapters.chat.llama_cpp import LlamaCppChatModel
from adapters.postgres.cancel_listener import PgCancelListener
from application.ports.token_verifier import TokenVerifier
from entrypoints.config import Settings
from entrypoints.database import Database
from entrypoints.http.controllers.agents import AgentController
from entrypoints.http.controllers.chat import ChatController
from entrypoints.http.controllers.conversations import ConversationController
from entrypoints.http.controllers.files import FileController
from entrypoints.http.controllers.knowledge_bases import KnowledgeBaseController
from entrypoints.http.controllers.search import search_knowledge_bases
from entrypoints.http.controllers.system import health, jwks
from entrypoints.http.controllers.uploads import presign_upload, receive_upload
from entrypoints.http.errors import EXCEPTION_HANDLERS
from entrypoints.http.middleware import (
    PUBLIC_PATHS,
    BearerAuthenticationMiddleware,
    RequestContextMiddleware,
    RequestScopeMiddleware,
)
from entrypoints.wiring import make_container


async def _warm_up(app: Litestar) -> None:
    """Open the database pool, build the token verifier and start listening for cancels
    before the first request, so that a database or configuration problem stops start-up
    instead of failing requests; start the bundled model's runner when it is the default chat
    model, so that the first answer pays no load."""
    container: AsyncContainer = app.state.dishka_container
    await container.get(asyncpg.Pool)
    await container.get(TokenVerifier)
    await container.get(PgCancelListener)
    settings = await container.get(Settings)
    if settings.local_model_preload and settings.default_chat_model.startswith("local:"):
        (await container.get(LlamaCppChatModel)).start()


def create_litestar(settings: Settings, database: Database, *providers: Provider) -> Litestar:
    """The Litestar app with its container; `providers` override any default adapter."""
    container = make_container(settings, database, *providers)
    handlers: list[Any] = [
        KnowledgeBaseController,
        ChatController,
        FileController,
        AgentController,
        ConversationController,
        search_knowledge_bases,
        presign_upload,
        health,
        jwks,
    ]
    if settings.storage == "local":
        handlers.append(receive_upload)
    app = Litestar(
        route_handlers=handlers,
        middleware=[
            DefineMiddleware(BearerAuthenticationMiddleware, exclude=list(PUBLIC_PATHS)),
            RequestScopeMiddleware,
        ],
        exception_handlers=EXCEPTION_HANDLERS,
        openapi_config=OpenAPIConfig(
            title="Agent Platform API",
            version="1.0.0",
            path="/schema",
            render_plugins=[ScalarRenderPlugin()],
            components=Components(
                security_schemes={
                    "BearerToken": SecurityScheme(type="http", scheme="bearer", bearer_format="JWT")
                }
            ),
            security=[{"BearerToken": []}],
        ),
        on_startup=[_warm_up],
        on_shutdown=[container.close],
        debug=False,
        logging_config=None,
    )
    app.state.dishka_container = container
    return app


def create_app(settings: Settings, database: Database, *providers: Provider) -> ASGIApp:
    """The served ASGI app: Litestar wrapped so that every response, 404s included, carries
    `X-Request-ID` and is logged once."""
    return RequestContextMiddleware(create_litestar(settings, database, *providers))
