from __future__ import annotations

import pytest

from adapters.identity.clerk_claims import identity_from_claims
from domain.errors import Forbidden
from domain.identity import ADMIN_ROLE, MEMBER_ROLE, Caller, Identity


def test_clerk_v1_claims():
    identity = identity_from_claims(
        {
            "sub": "user_1",
            "org_id": "org_a",
            "org_role": "org:admin",
            "org_permissions": ["org:agents:manage", "not-org"],
            "email": "a@example.com",
            "first_name": "Ada",
        }
    )
    assert identity == Identity(
        user_id="user_1",
        org_id="org_a",
        role=ADMIN_ROLE,
        permissions=frozenset({"org:agents:manage"}),
        email="a@example.com",
        first_name="Ada",
    )


def test_clerk_v2_claims_decode_feature_permission_masks():
    identity = identity_from_claims(
        {
            "sub": "user_2",
            "v": 2,
            "o": {"id": "org_b", "rol": "basic_member", "per": "manage,read", "fpm": "1,3"},
            "fea": "o:agents,o:console,u:billing",
        }
    )
    assert identity.role == MEMBER_ROLE
    assert identity.permissions == {
        "org:agents:manage",
        "org:console:manage",
        "org:console:read",
    }


def test_claims_postgres_cannot_store_are_dropped_and_masks_are_plain_digits():
    identity = identity_from_claims(
        {
            "sub": "user_2",
            "email": "a\x00@example.com",
            "first_name": "Ada\ud800",
            "last_name": " Lovelace ",
            "o": {"id": "org_b", "rol": "member", "per": "manage,read", "fpm": "9" * 5000},
            "fea": "o:agents",
        }
    )
    assert (identity.email, identity.first_name, identity.last_name) == (None, None, "Lovelace")
    assert identity.permissions == frozenset()
    masked = {"sub": "u", "o": {"id": "o", "rol": "member", "per": "manage", "fpm": "\u0661"}}
    assert identity_from_claims({**masked, "fea": "o:agents"}).permissions == frozenset()


def test_v2_admin_role_is_normalised():
    assert identity_from_claims({"sub": "u", "o": {"id": "org", "rol": "admin"}}).role == ADMIN_ROLE


def test_token_without_organization_is_forbidden_as_caller():
    identity = identity_from_claims({"sub": "u", "org_role": "org:admin"})
    assert identity.org_id is None and identity.role is None
    with pytest.raises(Forbidden, match="User is not part of any organization"):
        identity.as_caller()


def test_caller_permissions():
    member = Caller(user_id="u", org_id="o", permissions=frozenset({"org:agents:manage"}))
    assert member.has_permission("org:agents:manage")
    assert not member.has_permission("org:console:access")
    assert Caller(user_id="u", org_id="o", role=ADMIN_ROLE).has_permission("org:console:access")
