"""The tool servers' settings (`AP_SECRETS_KEY`, `AP_TOOL_*`), read with the others by
`Settings.from_env` and kept as `Settings.tools`."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from domain.tool_approvals import DEFAULT_APPROVAL_TTL
from entrypoints.env_reader import EnvReader

DEFAULT_TOOL_TIMEOUT = 30.0
DEFAULT_MAX_OFFERED = 20
_HOST_NAME = re.compile(
    r"(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\.?"
)


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """How the service reaches the tool servers its agents call.

    - `secrets_key`: `AP_SECRETS_KEY`, the keys (comma-separated, the first sealing) that seal
      the servers' header values; None: a key generated and kept in the data directory;
    - `allowed_hosts`: host names, IP addresses and CIDR networks a tool server may be at even
      though they are loopback, private or link-local (`AP_TOOL_ALLOWED_HOSTS`);
    - `timeout`: seconds a call to a tool server may take (`AP_TOOL_TIMEOUT`);
    - `max_offered`: at most this many tools are offered to a model in one answer;
    - `approval_ttl`: seconds a call waits for a member's approval before it counts as denied
      (`AP_TOOL_APPROVAL_TTL`).
    """

    secrets_key: str | None = field(default=None, repr=False)
    allowed_hosts: tuple[str, ...] = ()
    timeout: float = DEFAULT_TOOL_TIMEOUT
    max_offered: int = DEFAULT_MAX_OFFERED
    approval_ttl: float = DEFAULT_APPROVAL_TTL

    @classmethod
    def from_env(cls, environ: Mapping[str, str], problems: list[str]) -> ToolSettings:
        """The settings in `environ`; each invalid one adds to `problems` and keeps its
        default."""
        env = EnvReader(environ, problems)
        secrets_key = env.text("AP_SECRETS_KEY")
        if secrets_key is not None:
            from adapters.secrets.fernet_box import parse_keys

            try:
                parse_keys(secrets_key)
            except ValueError as problem:
                problems.append(str(problem))
                secrets_key = None
        return cls(
            secrets_key=secrets_key,
            allowed_hosts=_hosts(env.text("AP_TOOL_ALLOWED_HOSTS") or "", problems),
            timeout=env.number("AP_TOOL_TIMEOUT", DEFAULT_TOOL_TIMEOUT, 0.1, 600.0),
            max_offered=env.integer("AP_TOOL_MAX_OFFERED", DEFAULT_MAX_OFFERED, 1, 128),
            approval_ttl=env.number(
                "AP_TOOL_APPROVAL_TTL", DEFAULT_APPROVAL_TTL, 60.0, 30 * 86_400.0
            ),
        )


def _hosts(value: str, problems: list[str]) -> tuple[str, ...]:
    hosts: list[str] = []
    for part in value.split(","):
        host = part.strip().lower().removeprefix("[").removesuffix("]")
        if not host:
            continue
        try:
            hosts.append(
                str(ipaddress.ip_network(host, strict=False))
                if "/" in host
                else str(ipaddress.ip_address(host))
            )
        except ValueError:
            if _HOST_NAME.fullmatch(host) and not host.replace(".", "").isdigit():
                hosts.append(host.rstrip("."))
            else:
                problems.append(
                    f"AP_TOOL_ALLOWED_HOSTS: {part.strip()[:100]!r} is not a host name, an IP "
                    "address or a CIDR network"
                )
    return tuple(dict.fromkeys(hosts))
