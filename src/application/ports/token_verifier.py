from __future__ import annotations

from typing import Protocol

from domain.identity import Identity


class TokenVerifier(Protocol):
    """Turns a bearer token into the identity it proves.

    Raises `Unauthenticated` for anything that is not a valid, unexpired token of the
    configured issuer signed with an asymmetric key it publishes.
    """

    async def verify(self, token: str) -> Identity:
        """The identity the token proves."""
        ...
