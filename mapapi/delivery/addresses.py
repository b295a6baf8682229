"""The address guard: webhook URLs never reach inside the network.

A URL's host is checked when the endpoint is saved and again at every
attempt, because a name's DNS answers can change. An attempt connects to
the very address that was checked (``Destination.address``), so no second
lookup can slip a private address in between. This module uses nothing
else of mapapi: the services check URLs with it, the sender connects with it.
"""

import ipaddress
import socket
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

#: How long a lookup may take; past it the name counts as not resolving.
RESOLVE_SECONDS = 5.0
_DEFAULT_PORTS = {"http": 80, "https": 443}
# getaddrinfo cannot be interrupted: lookups run here, and a caller stops
# waiting for one at its deadline.
_resolver = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mapapi-resolve")


class AddressRefused(ValueError):
    """The URL is not one the service will send to."""


@dataclass(frozen=True)
class Target:
    """A URL taken apart: where to connect and what to ask for."""

    scheme: str
    host: str  # as the Host header and TLS name carry it (IDNA, no brackets)
    port: int
    path: str  # path and query, percent-encoded, never empty
    host_header: str


@dataclass(frozen=True)
class Destination:
    """A target with the checked address to connect to."""

    target: Target
    address: str


def parse_url(url: str) -> Target:
    """The URL's parts, or AddressRefused saying what is wrong with it."""
    if any(ord(char) <= 0x20 or ord(char) == 0x7F for char in url):
        raise AddressRefused("Must not contain spaces or control characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise AddressRefused("Must be a valid URL.") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise AddressRefused("Must be an http or https URL.")
    if "@" in parts.netloc:
        raise AddressRefused("Must not contain user information.")
    if not parts.hostname:
        raise AddressRefused("Must name a host.")
    host = _ascii_host(parts.hostname)
    port = port or _DEFAULT_PORTS[scheme]
    path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
    if parts.query:
        path += "?" + quote(parts.query, safe="/?%:@!$&'()*+,;=-._~")
    shown = f"[{host}]" if ":" in host else host
    if port != _DEFAULT_PORTS[scheme]:
        shown += f":{port}"
    return Target(scheme, host, port, path, shown)


def _ascii_host(hostname: str) -> str:
    try:
        return hostname.encode("idna").decode("ascii")
    except UnicodeError:
        raise AddressRefused("Must name a valid host.") from None


def is_forbidden(address: str) -> bool:
    """Loopback, private, link-local, multicast, reserved, unspecified or
    otherwise not global; an IPv4-mapped IPv6 address as its IPv4 one."""
    ip = ipaddress.ip_address(address.partition("%")[0])
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


def literal_address(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def resolve(host: str, port: int, timeout: float = RESOLVE_SECONDS) -> list[str]:
    """The addresses ``host`` resolves to; OSError when it does not (in time)."""
    literal = literal_address(host)
    if literal is not None:
        return [literal]
    lookup = _resolver.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        answers = lookup.result(timeout=timeout)
    except FutureTimeout:
        raise OSError(f"resolving {host} took longer than {timeout:g} s") from None
    return list(dict.fromkeys(answer[4][0] for answer in answers))


def _refuse_private(addresses: list[str]) -> None:
    if any(is_forbidden(address) for address in addresses):
        raise AddressRefused(
            "Must not point to a loopback, private, link-local, multicast, reserved "
            "or unspecified address (unless the service runs with MAPAPI_WEBHOOKS_ALLOW_PRIVATE=1)."
        )


def check_url(url: str, *, allow_private: bool) -> str:
    """``url`` when it may be saved as a webhook URL; else AddressRefused.

    A name that does not resolve now is accepted (a receiver being set up,
    or no DNS here): every attempt resolves and checks it again.
    """
    target = parse_url(url)
    if not allow_private:
        try:
            addresses = resolve(target.host, target.port)
        except OSError:
            return url
        _refuse_private(addresses)
    return url


def destination(url: str, *, allow_private: bool) -> Destination:
    """Where an attempt connects: resolved and checked now. AddressRefused
    for a forbidden address, OSError when the name does not resolve."""
    target = parse_url(url)
    addresses = resolve(target.host, target.port)
    if not allow_private:
        _refuse_private(addresses)
    return Destination(target, addresses[0])
