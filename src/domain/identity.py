"""Who is calling: the identity a token proves and the organization member it acts as."""

from __future__ import annotations

from dataclasses import dataclass, field

from domain.errors import Forbidden

ADMIN_ROLE = "org:admin"
MEMBER_ROLE = "org:member"
AGENTS_MANAGE = "org:agents:manage"
CONSOLE_ACCESS = "org:console:access"
NO_ORGANIZATION = "User is not part of any organization"


def normalise_role(role: str | None) -> str | None:
    """Map an identity provider's role name (`admin`, `org:admin`, `basic_member`) to ours."""
    if not role:
        return None
    bare = role.removeprefix("org:")
    return ADMIN_ROLE if bare == "admin" else MEMBER_ROLE


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    """What a verified token says about its bearer; the organization may be absent."""

    user_id: str
    org_id: str | None
    role: str | None = None
    permissions: frozenset[str] = field(default_factory=frozenset)
    email: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    issued_at: float | None = None
    """When the token was issued (its `iat`); None for identities the service makes itself."""

    def as_caller(self) -> Caller:
        """The member this identity acts as; a token without an organization gets 403."""
        if not self.org_id:
            raise Forbidden(NO_ORGANIZATION)
        return Caller(
            user_id=self.user_id,
            org_id=self.org_id,
            role=self.role or MEMBER_ROLE,
            permissions=self.permissions,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Caller:
    """An organization member making a request. The organization is never taken from a body."""

    user_id: str
    org_id: str
    role: str = MEMBER_ROLE
    permissions: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN_ROLE

    def has_permission(self, permission: str) -> bool:
        """Admins hold every permission; members hold the ones their token lists."""
        return self.is_admin or permission in self.permissions
