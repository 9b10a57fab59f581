"""Organization claims of Clerk session tokens, v1 and v2, read into an `Identity`.

v1: `org_id`, `org_role` (`org:admin`), `org_permissions` (`["org:feature:perm", ...]`).
v2: `o.id`, `o.rol` (`admin`), `o.per` (`"read,manage"`) and `o.fpm` (`"3,1"`), where each
number of `fpm` is a bit mask over `per` for the matching organization feature of `fea`
(`"o:agents,o:console"`), giving permissions such as `org:agents:manage`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from domain.identity import Identity, normalise_role
from domain.text import is_storable

# A feature's permission mask: ASCII digits, short enough that `int` is cheap.
_MASK = re.compile(r"[0-9]{1,19}")


def _text(value: Any) -> str | None:
    """A claim's trimmed text; None when absent, empty, or holding what PostgreSQL cannot store
    (NUL, an unpaired surrogate), as the claim is kept in the member directory."""
    if not isinstance(value, str) or not is_storable(value):
        return None
    return value.strip() or None


def _id(value: Any) -> str | None:
    """An id claim as sent, untrimmed: `" org_a"` must not name `org_a` (the verifier refuses
    ids with spaces)."""
    if not isinstance(value, str) or not value:
        return None
    return value


def _split(value: Any) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list):
        return [part for part in value if isinstance(part, str) and part]
    return []


def _v2_permissions(org: Mapping[str, Any], features_claim: Any) -> set[str]:
    permissions = _split(org.get("per"))
    if any(p.startswith("org:") for p in permissions):
        return {p for p in permissions if p.startswith("org:")}
    masks = _split(org.get("fpm"))
    features = [f.removeprefix("o:") for f in _split(features_claim) if f.startswith("o:")]
    granted: set[str] = set()
    for feature, mask in zip(features, masks, strict=False):
        if not _MASK.fullmatch(mask):
            continue
        bits = int(mask)
        for index, permission in enumerate(permissions):
            if bits & (1 << index):
                granted.add(f"org:{feature}:{permission}")
    return granted


def identity_from_claims(claims: Mapping[str, Any]) -> Identity:
    """The identity of verified claims; `sub` must already have been checked as present."""
    org_claim = claims.get("o")
    if isinstance(org_claim, Mapping):
        org_id = _id(org_claim.get("id"))
        role = normalise_role(_text(org_claim.get("rol")))
        permissions = _v2_permissions(org_claim, claims.get("fea"))
    else:
        org_id = _id(claims.get("org_id"))
        role = normalise_role(_text(claims.get("org_role")))
        permissions = {p for p in _split(claims.get("org_permissions")) if p.startswith("org:")}
    return Identity(
        user_id=str(claims["sub"]),
        org_id=org_id,
        role=role if org_id else None,
        permissions=frozenset(permissions) if org_id else frozenset(),
        email=_text(claims.get("email")),
        first_name=_text(claims.get("first_name")),
        last_name=_text(claims.get("last_name")),
        issued_at=float(claims["iat"]) if "iat" in claims else None,
    )
