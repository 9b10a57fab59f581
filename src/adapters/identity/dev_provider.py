"""The development identity provider: a signing key kept under the data directory, its public
half published as a JWKS, and tokens in the Clerk v2 shape that the verifier accepts."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

DEV_ISSUER = "agent-platform-dev"


class DevIdentityProvider:
    """Issues RS256 tokens with a key stored at `key_path` (created on first use)."""

    def __init__(self, key_path: Path, issuer: str = DEV_ISSUER) -> None:
        self.issuer = issuer
        self._key = self._load_or_create(key_path)
        public_jwk = json.loads(RSAAlgorithm.to_jwk(self._key.public_key()))
        self.kid = _thumbprint(public_jwk)
        self._jwk = {**public_jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}

    @staticmethod
    def _load_or_create(path: Path) -> rsa.RSAPrivateKey:
        if path.exists():
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
            if not isinstance(key, rsa.RSAPrivateKey):
                raise ValueError(f"{path} does not hold an RSA private key")
            return key
        path.parent.mkdir(parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        # Written whole under a private name, then linked into place: a process starting at
        # the same moment sees no file or the whole key, never a half-written one, and the
        # link fails if another process won the race (its key is then the one used).
        staging = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            _place_exclusively(staging, path)
        except FileExistsError:
            return DevIdentityProvider._load_or_create(path)
        finally:
            staging.unlink(missing_ok=True)
        return key

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self._jwk]}

    def issue(
        self,
        *,
        user_id: str,
        org_id: str | None,
        role: str = "member",
        email: str | None = None,
        ttl: int = 3600,
        permissions: list[str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": user_id,
            "iat": now,
            "nbf": now,
            "exp": now + ttl,
            "v": 2,
        }
        if org_id:
            claims["o"] = {
                "id": org_id,
                "rol": role.removeprefix("org:"),
                "per": ",".join(permissions or []),
            }
        if email:
            claims["email"] = email
        claims.update(extra or {})
        return jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": self.kid})


def _place_exclusively(staging: Path, path: Path) -> None:
    """`staging` at `path` unless a file is there already (`FileExistsError`). A hard link is
    atomic; where the file system has none (some FUSE and bind mounts), an exclusive create
    and copy, which a reader at that instant may see empty."""
    try:
        os.link(staging, path)
    except FileExistsError:
        raise
    except OSError:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(staging.read_bytes())


def _thumbprint(jwk: dict[str, Any]) -> str:
    """The RFC 7638 thumbprint of an RSA public key: a stable key id."""
    canonical = json.dumps({k: jwk[k] for k in ("e", "kty", "n")}, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
