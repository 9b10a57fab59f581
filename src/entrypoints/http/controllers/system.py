"""Public routes: health and the development identity provider's JWKS."""

from __future__ import annotations

from typing import Any

from dishka import FromDishka
from dishka.integrations.litestar import inject
from litestar import get

from adapters.identity.dev_provider import DevIdentityProvider
from domain.errors import NotFound
from entrypoints.http.openapi import errors


@get(
    "/health",
    tags=["System"],
    security=[],
    responses=errors(public=True),
    summary="Liveness (no token needed)",
)
async def health() -> dict[str, str]:
    return {"status": "ok"}


@get(
    "/.well-known/jwks.json",
    tags=["System"],
    security=[],
    responses=errors(404, public=True),
    summary="The development identity provider's public keys (404 with an external provider)",
)
@inject
async def jwks(dev: FromDishka[DevIdentityProvider | None]) -> dict[str, Any]:
    if dev is None:
        raise NotFound("Not Found")
    return dev.jwks()
