"""dishka's `inject` for Litestar handlers, reading the request's container straight from the
ASGI scope, where `RequestScopeMiddleware` puts it."""

from __future__ import annotations

from collections.abc import Callable
from inspect import Parameter
from typing import Any, ParamSpec, TypeVar, get_type_hints

from dishka import AsyncContainer
from dishka.integrations.base import wrap_injection
from litestar import Request

P = ParamSpec("P")
T = TypeVar("T")
CONTAINER_KEY = "dishka_container"
_REQUEST = Parameter("request", Parameter.KEYWORD_ONLY, annotation=Request)


def inject(func: Callable[P, T]) -> Callable[P, T]:
    """As `dishka.integrations.litestar.inject`: the handler's `FromDishka[...]` parameters
    are resolved from the request's container. dishka's own reads it through `request.state`,
    which builds a `State` over the scope's state on every request."""
    takes_request = "request" in get_type_hints(func)
    return wrap_injection(
        func=func,
        is_async=True,
        additional_params=[] if takes_request else [_REQUEST],
        container_getter=_container,
    )


def _container(_: tuple[Any, ...], kwargs: dict[str, Any]) -> AsyncContainer:
    container: AsyncContainer = kwargs["request"].scope["state"][CONTAINER_KEY]
    return container
