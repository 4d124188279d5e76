"""The rules of the egress allowlist: which names a sandboxed command may reach, and at which addresses.

An entry is a host name, optionally with a port: `pypi.org` (ports 80 and 443), `pypi.org:443`,
`*.pythonhosted.org` (any subdomain, not the name itself). Entries are names, never addresses:
an IP literal, `localhost` or a bare `*` is refused when the list is made.

A request is allowed when its host is a name (not an IP literal in any spelling, `2130706433`
and `0x7f.1` included) matching an entry on that port. The name is then resolved here, on the
trusted side, and every address it resolves to must be public (not loopback, private,
link-local such as the metadata address 169.254.169.254, carrier-grade NAT, multicast, reserved,
unique-local `fc00::/7` or an IPv4-mapped form of those); one that is not refuses the request, so
an allowed name pointed at an internal address (DNS rebinding) reaches nothing. A pinned address
(`pins`, set by the operator, for a local mirror or a test) is used as given, without that check.

Nothing here resolves a name that is not on the list, so a name made of data (DNS exfiltration)
never leaves the host.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Mapping

__all__ = ["AllowRule", "EgressRefused", "check_request", "is_ip_literal", "parse_allow", "public_address"]

DEFAULT_PORTS = (80, 443)
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


class EgressRefused(Exception):
    """A request the allowlist does not let through; the message says why."""


class AllowRule:
    """One allowlist entry: a name (or `*.suffix`) and the ports it is open on."""

    def __init__(self, pattern: str, ports: tuple[int, ...]) -> None:
        self.pattern = pattern
        self.ports = ports

    def matches(self, host: str, port: int) -> bool:
        if port not in self.ports:
            return False
        if self.pattern.startswith("*."):
            return host.endswith(self.pattern[1:])
        return host == self.pattern

    def __repr__(self) -> str:
        return f"AllowRule({self.pattern!r}, ports={self.ports})"


def is_ip_literal(host: str) -> bool:
    """Whether `host` is an address in any form a resolver or `connect` would take as one
    (dotted, decimal `2130706433`, hex `0x7f.1`, octal, bracketed IPv6, with a zone)."""
    text = host.strip("[]").split("%", 1)[0]
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        pass
    try:
        socket.inet_aton(text)  # accepts the legacy short and numeric forms
        return True
    except OSError:
        return False


def _normal_name(host: str) -> str:
    return host.strip().rstrip(".").lower()


def parse_allow(entries: Iterable[str]) -> list[AllowRule]:
    """The rules of a list of entries (see the module docstring).

    Raises:
        ValueError: an entry that is not a host name (with an optional port), naming it.
    """
    rules: list[AllowRule] = []
    for entry in entries:
        text = entry.strip()
        name = text
        ports: tuple[int, ...] = DEFAULT_PORTS
        if text.count(":") == 1:
            name, port_text = text.split(":")
            if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
                raise ValueError(f"network allowlist entry {entry!r}: the port must be a number from 1 to 65535")
            ports = (int(port_text),)
        name = _normal_name(name)
        wildcard = name.startswith("*.")
        bare = name[2:] if wildcard else name
        if is_ip_literal(bare) or ":" in bare:
            raise ValueError(f"network allowlist entry {entry!r} is an IP address; name the host instead (addresses are never allowed)")
        labels = bare.split(".")
        if not bare or not all(_LABEL.match(label) for label in labels):
            raise ValueError(f"network allowlist entry {entry!r} is not a host name (letters, digits, '-', '.'; '*.' only in front)")
        if labels[-1].isdigit():
            raise ValueError(f"network allowlist entry {entry!r}: the last label of a host name cannot be all digits")
        if bare == "localhost" or bare.endswith(".localhost"):
            raise ValueError(f"network allowlist entry {entry!r} names this machine, which is never reachable")
        rules.append(AllowRule(name, ports))
    return rules


def public_address(address: str) -> bool:
    """Whether `address` is on the public internet (not loopback, private, link-local ...)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if mapped is not None and not public_address(str(mapped)):
            return False
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_link_local or ip.is_loopback)


Resolver = Callable[[str, int], list[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (the host's resolver)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def check_request(
    host: str,
    port: int,
    rules: list[AllowRule],
    *,
    pins: Mapping[str, str] | None = None,
    resolve: Resolver = system_resolver,
) -> str:
    """The address to connect to for `host:port`, or `EgressRefused` with the reason.

    The name is checked against the rules before anything resolves it.
    """
    name = _normal_name(host)
    if is_ip_literal(name):
        raise EgressRefused(f"{host!r} is an IP address; only allowed host names are reachable")
    if not any(rule.matches(name, port) for rule in rules):
        raise EgressRefused(f"{name}:{port} is not on the network allowlist")
    pinned = (pins or {}).get(name)
    if pinned is not None:
        return pinned
    try:
        addresses = resolve(name, port)
    except OSError as e:
        raise EgressRefused(f"{name} does not resolve: {e}") from None
    if not addresses:
        raise EgressRefused(f"{name} resolves to no address")
    internal = [a for a in addresses if not public_address(a)]
    if internal:
        raise EgressRefused(f"{name} resolves to {internal[0]}, which is not a public address")
    return addresses[0]
