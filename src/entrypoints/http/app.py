"""The Litestar application factory."""

from __future__ import annotations

from typing import Any

import asyncpg
from dishka import AsyncContainer, Provider
from litestar import Litestar
from litestar._openapi.plugin import OpenAPIPlugin
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.static_files import create_static_files_router
from litestar.types import ASGIApp
from swagger_ui_bundle import swagger_ui_path

from adapters.chat.llama_cpp import LlamaCppChatModel
from adapters.postgres.cancel_listener import PgCancelListener
from application.ports.token_verifier import TokenVerifier
from entrypoints.config import Settings
from entrypoints.database import Database
from entrypoints.http.console import ConsoleSite, console_files
from entrypoints.http.controllers.admin import AdminController
from entrypoints.http.controllers.agents import AgentController
from entrypoints.http.controllers.chat import ChatController
from entrypoints.http.controllers.console import console_routes
from entrypoints.http.controllers.conversations import ConversationController
from entrypoints.http.controllers.downloads import download_file
from entrypoints.http.controllers.files import FileController
from entrypoints.http.controllers.inbound_email import inbound_email
from entrypoints.http.controllers.knowledge_bases import KnowledgeBaseController
from entrypoints.http.controllers.schedules import ScheduledTaskController
from entrypoints.http.controllers.search import search_knowledge_bases
from entrypoints.http.controllers.settings import OrgSettingsController
from entrypoints.http.controllers.skills import skill_router
from entrypoints.http.controllers.system import (
    complete_system_document,
    health,
    jwks,
    live,
    metrics,
    ready,
)
from entrypoints.http.controllers.tools import ToolServerController
from entrypoints.http.controllers.uploads import presign_upload, receive_upload, serve_download
from entrypoints.http.controllers.webhooks import identity_webhook
from entrypoints.http.errors import EXCEPTION_HANDLERS
from entrypoints.http.mcp_endpoint import McpEndpoint
from entrypoints.http.methods import allowed_methods
from entrypoints.http.metrics import HttpMetrics
from entrypoints.http.middleware import (
    PUBLIC_PATHS,
    BearerAuthenticationMiddleware,
    RequestContextMiddleware,
    RequestScopeMiddleware,
)
from entrypoints.http.openapi import complete_document
from entrypoints.http.validation import check_request
from entrypoints.preload import start_preloading
from entrypoints.wiring import make_container

SWAGGER_ASSETS = "/schema/assets"


async def _warm_up(app: Litestar) -> None:
    """Open the database pool, build the token verifier and start listening for cancels
    before the first request, so that a database or configuration problem stops start-up
    instead of failing requests; start the bundled model's runner when it is the default chat
    model, so that the first answer pays no load, and load the search's local models in the
    background (`entrypoints.preload`)."""
    container: AsyncContainer = app.state.dishka_container
    await container.get(asyncpg.Pool)
    await container.get(TokenVerifier)
    settings = await container.get(Settings)
    if settings.local_model_preload and settings.default_chat_model.startswith("local:"):
        (await container.get(LlamaCppChatModel)).start()
    if settings.local_model_preload and settings.search.preload:
        app.state.preloading = start_preloading(container, settings)
    # After the model: the container closes in the reverse order, so the answers still running
    # are stopped and recorded as such while their model is still there.
    await container.get(PgCancelListener)


def create_litestar(settings: Settings, database: Database, *providers: Provider) -> Litestar:
    """The Litestar app with its container; `providers` override any default adapter."""
    container = make_container(settings, database, *providers)
    handlers: list[Any] = [
        KnowledgeBaseController,
        ChatController,
        FileController,
        AgentController,
        AdminController,
        OrgSettingsController,
        ScheduledTaskController,
        ConversationController,
        ToolServerController,
        skill_router(settings.skill_limits),
        search_knowledge_bases,
        presign_upload,
        download_file,
        health,
        live,
        ready,
        metrics,
        jwks,
        identity_webhook,
        inbound_email,
        # The web console: its files, client-side routes and config.json, and its sign-in.
        console_files,
        *console_routes(settings),
    ]
    if settings.storage == "local":
        handlers += [receive_upload, serve_download]
    handlers.append(McpEndpoint().handler)
    handlers.append(
        create_static_files_router(
            SWAGGER_ASSETS, directories=[swagger_ui_path], include_in_schema=False
        )
    )
    app = Litestar(
        route_handlers=handlers,
        middleware=[
            DefineMiddleware(BearerAuthenticationMiddleware, exclude=PUBLIC_PATHS),
            RequestScopeMiddleware,
        ],
        exception_handlers=EXCEPTION_HANDLERS,
        before_request=check_request,
        openapi_config=OpenAPIConfig(
            title="Agent Platform API",
            version="1.0.0",
            path="/schema",
            # Swagger UI from the pinned swagger-ui-bundle-v2 package, served by this service:
            # the page works without internet access.
            render_plugins=[
                SwaggerRenderPlugin(
                    js_url=f"{SWAGGER_ASSETS}/swagger-ui-bundle.js",
                    css_url=f"{SWAGGER_ASSETS}/swagger-ui.css",
                    standalone_preset_js_url=f"{SWAGGER_ASSETS}/swagger-ui-standalone-preset.js",
                    favicon=f'<link rel="icon" type="image/png" '
                    f'href="{SWAGGER_ASSETS}/favicon-32x32.png">',
                    path="/",
                )
            ],
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
    app.state.console = ConsoleSite.for_settings(settings)
    app.state.http_metrics = HttpMetrics()
    app.state.allowed_methods = allowed_methods(app)
    plugin = app.plugins.get(OpenAPIPlugin)
    complete_document(plugin)
    complete_system_document(plugin.provide_openapi_schema())
    return app


def create_app(settings: Settings, database: Database, *providers: Provider) -> ASGIApp:
    """The served ASGI app: Litestar wrapped so that every response, 404s included, carries
    `X-Request-ID`, is logged once and is counted in the app's metrics."""
    return served(create_litestar(settings, database, *providers))


def served(app: Litestar) -> ASGIApp:
    """`app` as served (see `create_app`)."""
    return RequestContextMiddleware(app, metrics=app.state.http_metrics)
