"""Which addresses a tool server may have: the outbound-safety rule of `CONTRACT.md` ("Tools").

An address is allowed when it is globally routable or when the deployment lists it
(`AP_TOOL_ALLOWED_HOSTS`: host names, IP addresses or CIDR networks). The rule is applied to
every address a host name resolves to, after resolution, on every connection
(`adapters.tools.transport`), never to the URL's text alone.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from urllib.parse import urlsplit

import anyio

from application.ports.tool_connector import AddressNotAllowed, ToolServerUnreachable
from domain.tool_servers import ADDRESS_NOT_ALLOWED

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolves a host name and port to the IP addresses (as text) a connection may use."""

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_DEFAULT_PORTS = {"http": 80, "https": 443}


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses from the system's resolver (getaddrinfo), for TCP."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries and a network may translate it to."""
    embedded: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        embedded.append(address.ipv4_mapped)
    if address in _NAT64:
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        embedded.append(address.sixtofour)
    if address.teredo is not None:
        embedded.extend(address.teredo)
    return embedded


def is_public(address: IPAddress) -> bool:
    """Whether `address` is globally routable: not loopback, private, link-local, multicast,
    reserved, unspecified, shared (100.64/10), site-local, nor an IPv6 form of such an IPv4
    address (mapped, NAT64, 6to4, Teredo)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if not all(is_public(inner) for inner in embedded):
            return False
        # Python counts the mapped and NAT64 ranges as reserved; their IPv4 address decides.
        if address.ipv4_mapped is not None or address in _NAT64:
            return True
        if address.is_site_local:
            return False
    return address.is_global and not (
        address.is_multicast
        or address.is_reserved
        or address.is_loopback
        or address.is_link_local
        or address.is_private
        or address.is_unspecified
    )


def parse_address(text: str) -> IPAddress | None:
    """`text` as an IP address (an IPv6 zone dropped), or None when it is not one."""
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


class AddressPolicy:
    """The deployment's rule: a public address, or one `allowed_hosts` lists (a host name
    allows whatever that exact name resolves to; an IP address or CIDR network allows the
    addresses it covers)."""

    def __init__(self, allowed_hosts: Iterable[str] = ()) -> None:
        self._names: set[str] = set()
        self._networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for listed in allowed_hosts:
            entry = listed.strip()
            if not entry:
                continue
            try:
                self._networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                self._names.add(_normal_host(entry))

    def allows(self, host: str, address: IPAddress) -> bool:
        """Whether a connection to `host` may use `address`."""
        if _normal_host(host) in self._names:
            return True
        candidates: list[IPAddress] = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            candidates.append(address.ipv4_mapped)
        for candidate in candidates:
            if any(candidate in network for network in self._networks):
                return True
        return is_public(address)


def _normal_host(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


async def allowed_addresses(
    host: str, port: int, policy: AddressPolicy, resolver: Resolver
) -> list[str]:
    """The addresses to connect to for `host`, each checked; raise `AddressNotAllowed` unless
    every address the host resolves to is allowed (one bad answer refuses them all), and
    `ToolServerUnreachable` when it does not resolve."""
    literal = parse_address(host.strip("[]"))
    if literal is not None:
        addresses = [str(literal)]
    else:
        try:
            resolved = await resolver(host, port)
        except OSError as error:
            raise ToolServerUnreachable(
                f"The tool server's host {host[:253]!r} cannot be resolved"
            ) from error
        addresses = list(dict.fromkeys(resolved))
    if not addresses:
        raise AddressNotAllowed(ADDRESS_NOT_ALLOWED)
    for text in addresses:
        address = parse_address(text)
        if address is None or not policy.allows(host, address):
            raise AddressNotAllowed(ADDRESS_NOT_ALLOWED)
    return addresses


def url_host_port(url: str) -> tuple[str, int]:
    """The host and port of an http(s) URL; raise `AddressNotAllowed` for any other URL."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise AddressNotAllowed(ADDRESS_NOT_ALLOWED) from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise AddressNotAllowed(ADDRESS_NOT_ALLOWED)
    return parts.hostname, port or _DEFAULT_PORTS[scheme]


async def check_url(url: str, policy: AddressPolicy, resolver: Resolver) -> None:
    """Raise `AddressNotAllowed` unless `url` is http(s) and its host resolves only to
    allowed addresses; connects to nothing."""
    host, port = url_host_port(url)
    await allowed_addresses(host, port, policy, resolver)
