"""`SecretBox` with Fernet (AES-128-CBC and HMAC-SHA256, from `cryptography`), keys from
`AP_SECRETS_KEY`.

A key is 32 random bytes in base64, standard or URL-safe (what `Fernet.generate_key()` gives).
`AP_SECRETS_KEY` may list several, separated by commas: the first seals, every one opens
(`MultiFernet`), so a key is rotated by putting the new one first and keeping the old one
until every sealed value has been sealed again (a tool server's headers are sealed again when
they are next sent). Without `AP_SECRETS_KEY`, `load_or_create_key` keeps a generated key in
the data directory, readable by its owner only.
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

KEY_BYTES = 32
KEY_PROBLEM = "AP_SECRETS_KEY must be 32 random bytes in base64 (several separated by commas)"


def parse_keys(value: str) -> list[bytes]:
    """The keys of `value` (comma-separated), each as Fernet's URL-safe base64 of its 32
    bytes; `ValueError(KEY_PROBLEM)` when one is not 32 bytes of base64 or there is none."""
    keys: list[bytes] = []
    for part in value.split(","):
        text = part.strip()
        if not text:
            continue
        standard = text.replace("-", "+").replace("_", "/")
        standard += "=" * (-len(standard) % 4)
        try:
            raw = base64.b64decode(standard, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(KEY_PROBLEM) from None
        if len(raw) != KEY_BYTES:
            raise ValueError(KEY_PROBLEM)
        keys.append(base64.urlsafe_b64encode(raw))
    if not keys:
        raise ValueError(KEY_PROBLEM)
    return keys


def load_or_create_key(path: Path) -> str:
    """The key kept at `path`, created (32 random bytes, base64, mode 0600) when absent."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole under a temporary name, then linked into place: a process starting at the
    # same moment (the worker child) reads either no file or the whole key, and one key wins.
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    temporary = Path(name)
    with os.fdopen(fd, "wb") as handle:  # mkstemp creates it with mode 0600
        handle.write(Fernet.generate_key())
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass
    finally:
        temporary.unlink()
    return path.read_text().strip()


class FernetSecretBox:
    """`SecretBox` over Fernet tokens: the first key seals, every key opens."""

    def __init__(self, keys: str) -> None:
        self._fernet = MultiFernet([Fernet(key) for key in parse_keys(keys)])

    def __repr__(self) -> str:
        return "FernetSecretBox(<keys hidden>)"

    def seal(self, plaintext: bytes) -> bytes:
        return self._fernet.encrypt(plaintext)

    def open(self, token: bytes) -> bytes:
        try:
            return self._fernet.decrypt(token)
        except InvalidToken:
            raise ValueError("the sealed value was changed or no configured key opens it") from None

    def reseal(self, token: bytes) -> bytes:
        """`token` sealed again under the first key (for a rotation); `ValueError` as `open`."""
        try:
            return self._fernet.rotate(token)
        except InvalidToken:
            raise ValueError("the sealed value was changed or no configured key opens it") from None
