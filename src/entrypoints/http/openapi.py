"""OpenAPI helpers: the error responses each route documents."""

from __future__ import annotations

from litestar.openapi.datastructures import ResponseSpec

from entrypoints.http.schemas import ErrorBody

_DESCRIPTIONS = {
    400: "Invalid request",
    401: "Missing or invalid bearer token",
    403: "The token's user lacks the role or belongs to no organization",
    404: "Not found in the caller's organization",
    409: "Conflicts with the current state",
    413: "Too large",
    500: "Unexpected failure",
}


def errors(*statuses: int) -> dict[int, ResponseSpec]:
    """Document `{"error", "details"}` bodies for the given statuses, plus 401 and 500."""
    codes = sorted({*statuses, 401, 500})
    return {
        code: ResponseSpec(data_container=ErrorBody, description=_DESCRIPTIONS[code])
        for code in codes
    }
