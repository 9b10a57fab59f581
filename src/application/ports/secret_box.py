from __future__ import annotations

from typing import Protocol


class SecretBox(Protocol):
    """Authenticated encryption of secrets at rest (a tool server's header values).

    `seal` encrypts with the current key; `open` decrypts what any configured key (the current
    one or an older one kept for rotation) sealed, and raises `ValueError` for a token that was
    changed or sealed by a key no longer configured.
    """

    def seal(self, plaintext: bytes) -> bytes:
        """The authenticated ciphertext of `plaintext`, under the current key."""
        ...

    def open(self, token: bytes) -> bytes:
        """The plaintext of `token`; `ValueError` when no configured key opens it."""
        ...
