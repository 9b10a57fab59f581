"""The domain's error hierarchy. The HTTP edge maps each class to one status code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class DomainError(Exception):
    """A rule of the domain was broken; `message` is safe to show to the caller."""

    def __init__(self, message: str, details: Sequence[Mapping[str, object]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = list(details) if details else []


class Invalid(DomainError):
    """The request is malformed or breaks a validation rule (400)."""


class Unauthenticated(DomainError):
    """No valid credentials were presented (401)."""


class Forbidden(DomainError):
    """The caller is known but may not do this (403)."""


class NotFound(DomainError):
    """The resource does not exist in the caller's organization (404)."""


class Conflict(DomainError):
    """The request clashes with the current state of a resource (409)."""


class PayloadTooLarge(DomainError):
    """The request body is larger than allowed (413)."""


def field_error(field: str, message: str) -> dict[str, object]:
    """One entry of an error's `details`: the offending field and what is wrong with it."""
    return {"field": field, "message": message}
