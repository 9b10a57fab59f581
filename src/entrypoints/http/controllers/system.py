"""Public routes: health and the development identity provider's JWKS."""

from __future__ import annotations

from typing import Any

from dishka import FromDishka
from dishka.integrations.litestar import inject
from litestar import get

from adapters.identity.dev_provider import DevIdentityProvider
from domain.errors import NotFound


@get("/health", tags=["System"], security=[], summary="Liveness")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@get("/.well-known/jwks.json", tags=["System"], security=[], summary="Development JWKS")
@inject
async def jwks(dev: FromDishka[DevIdentityProvider | None]) -> dict[str, Any]:
    if dev is None:
        raise NotFound("Not Found")
    return dev.jwks()
