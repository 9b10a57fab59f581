"""dishka's `inject` for Litestar handlers, reading the request's container straight from the
ASGI scope, where `RequestScopeMiddleware` puts it."""

from __future__ import annotations

from collections.abc import Callable
from inspect import Parameter, signature
from typing import Any, ParamSpec, TypeVar, get_type_hints

from dishka import AsyncContainer
from dishka.integrations.base import default_parse_dependency, wrap_injection
from litestar import Request

P = ParamSpec("P")
T = TypeVar("T")
CONTAINER_KEY = "dishka_container"
_REQUEST = Parameter("request", Parameter.KEYWORD_ONLY, annotation=Request)
_INJECTED = "__ap_injected__"


def inject(func: Callable[P, T]) -> Callable[P, T]:
    """As `dishka.integrations.litestar.inject`: the handler's `FromDishka[...]` parameters
    are resolved from the request's container. dishka's own reads it through `request.state`,
    which builds a `State` over the scope's state on every request. The types resolved are
    kept on the handler (`injected`)."""
    hints = get_type_hints(func, include_extras=True)
    takes_request = "request" in hints
    handler = wrap_injection(
        func=func,
        is_async=True,
        additional_params=[] if takes_request else [_REQUEST],
        container_getter=_container,
    )
    keys = (
        default_parse_dependency(parameter, hints.get(name, Any))
        for name, parameter in signature(func).parameters.items()
    )
    setattr(handler, _INJECTED, frozenset(key.type_hint for key in keys if key is not None))
    return handler


def injected(handler: Callable[..., Any]) -> frozenset[Any]:
    """The types `inject` resolves for `handler` from the request's container (none for a
    handler it did not wrap)."""
    types: frozenset[Any] = getattr(handler, _INJECTED, frozenset())
    return types


def _container(_: tuple[Any, ...], kwargs: dict[str, Any]) -> AsyncContainer:
    container: AsyncContainer = kwargs["request"].scope["state"][CONTAINER_KEY]
    return container
