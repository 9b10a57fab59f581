"""What a path allows, named the same way everywhere: an `OPTIONS` answer and a 405's
`Allow` list the path's methods in alphabetical order.

Litestar 2 answers `OPTIONS` from the methods of the first handlers registered for a path,
so a path whose handlers come from several registrations (`GET /kb/files` and
`POST /kb/files`, for one) was answered with some of its methods missing
(litestar-org/litestar#4169, fixed in Litestar 3). The service answers `OPTIONS` itself from
the finished routes instead."""

from __future__ import annotations

from typing import Any

from litestar import Litestar, Request, Response
from litestar.routes import HTTPRoute
from litestar.status_codes import HTTP_204_NO_CONTENT

OPTIONS = "OPTIONS"


def allowed_methods(app: Litestar) -> dict[str, str]:
    """`Allow` for each HTTP path template, `OPTIONS` included, once the app is built."""
    return {
        route.path_format: ", ".join(sorted(route.methods))
        for route in app.routes
        if isinstance(route, HTTPRoute)
    }


def options_answer(request: Request[Any, Any, Any]) -> Response[None] | None:
    """204 with the path's `Allow`, for a `before_request` hook to return instead of calling
    Litestar's own handler; None (Litestar answers) for a path the table does not know."""
    allow = request.app.state.allowed_methods.get(request.scope.get("path_template"))
    if allow is None:
        return None
    return Response(None, status_code=HTTP_204_NO_CONTENT, headers={"Allow": allow})


def documented_allow(allow: str) -> str:
    """A 405's `Allow` as the contract writes it (`Allow: POST`): the path's own methods,
    alphabetical, without the `OPTIONS` every path answers."""
    methods = {method.strip() for method in allow.split(",")}
    return ", ".join(sorted(m for m in methods if m.isupper() and m != OPTIONS))
