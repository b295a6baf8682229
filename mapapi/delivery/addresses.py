"""The address guard: webhook URLs never reach inside the network.

A URL's host is checked when the endpoint is saved and again at every
attempt, because a name's DNS answers can change. An attempt connects to
the very address that was checked (``Destination.address``), so no second
lookup can slip a private address in between. This module uses nothing
else of mapapi: the services check URLs with it, the sender connects with it.

Name lookups (``Lookups``) cannot be interrupted (``getaddrinfo`` blocks),
so each runs on a short-lived thread of its own and a caller stops waiting
at its deadline: a name whose lookup hangs holds one thread and delays only
the attempts to that name, never another's lookup. Callers that ask for a
name already being looked up wait for that lookup rather than start
another, so a hanging name holds one thread however often it is asked for.
"""

import asyncio
import ipaddress
import logging
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

#: How long a lookup may take; past it the name counts as not resolving.
RESOLVE_SECONDS = 5.0
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: NAT64's well-known prefix (RFC 6052): the last 32 bits are an IPv4 address.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
log = logging.getLogger(__name__)


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
    """Loopback, private, link-local, site-local, multicast, reserved,
    unspecified or otherwise not global.

    An IPv6 address that carries an IPv4 one is judged as that IPv4
    address: IPv4-mapped (``::ffff:a.b.c.d``), 6to4 (``2002::/16``) and
    NAT64 (``64:ff9b::/96``), so that ``2002:7f00:1::`` is loopback.
    Teredo (``2001::/32``) tunnels through a relay to an address that
    cannot be checked here: always refused.
    """
    ip = ipaddress.ip_address(address.partition("%")[0])
    if ip.version == 6:
        if ip.teredo is not None or ip.is_site_local:
            return True
        embedded = ip.ipv4_mapped or ip.sixtofour or _nat64_ipv4(ip)
        if embedded is not None:
            ip = embedded
    return (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


def _nat64_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip not in _NAT64:
        return None
    return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)


def literal_address(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


#: ``socket.getaddrinfo``'s signature: ``(host, port, type=...)``.
GetAddrInfo = Callable[..., list]


class Lookups:
    """Name lookups, each on a thread of its own, shared by whoever asks for
    the same name and port while it runs (see the module's docstring).

    ``getaddrinfo`` is the system's resolver; tests give one of their own.
    """

    def __init__(self, getaddrinfo: GetAddrInfo = socket.getaddrinfo):
        self._getaddrinfo = getaddrinfo
        self._running: dict[tuple[str, int], Future] = {}
        self._lock = threading.Lock()

    def resolve(self, host: str, port: int, timeout: float = RESOLVE_SECONDS) -> list[str]:
        """The addresses ``host`` resolves to; OSError when it does not (in time)."""
        literal = literal_address(host)
        if literal is not None:
            return [literal]
        try:
            return self._lookup(host, port).result(timeout=timeout)
        except FutureTimeout:
            raise _too_slow(timeout) from None

    async def resolve_async(
        self, host: str, port: int, timeout: float = RESOLVE_SECONDS
    ) -> list[str]:
        """``resolve`` for an event loop: it waits without holding a thread."""
        literal = literal_address(host)
        if literal is not None:
            return [literal]
        lookup = asyncio.wrap_future(self._lookup(host, port))
        # Its outcome is nobody's once every waiter has given up: taken here.
        lookup.add_done_callback(lambda done: done.cancelled() or done.exception())
        try:
            # Shielded: a waiter that gives up must not cancel the lookup others share.
            return await asyncio.wait_for(asyncio.shield(lookup), timeout)
        except TimeoutError:
            raise _too_slow(timeout) from None

    def _lookup(self, host: str, port: int) -> Future:
        key = (host, port)
        with self._lock:
            running = self._running.get(key)
            if running is None:
                running = self._running[key] = Future()
                running.set_running_or_notify_cancel()  # nobody may cancel what others share
                threading.Thread(
                    target=self._run, args=(key, running), name="mapapi-resolve", daemon=True
                ).start()
        return running

    def _run(self, key: tuple[str, int], future: Future) -> None:
        try:
            answers = self._getaddrinfo(*key, type=socket.SOCK_STREAM)
            future.set_result(list(dict.fromkeys(answer[4][0] for answer in answers)))
        except Exception as error:  # noqa: BLE001 - handed to the waiters, who report it
            future.set_exception(error)
        finally:
            with self._lock:
                self._running.pop(key, None)


def _too_slow(timeout: float) -> OSError:
    # No host name: this text reaches the delivery log and the service's log.
    return OSError(f"no answer within {timeout:g} s")


#: The system resolver's lookups, shared by every caller in the process.
system_lookups = Lookups()


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
            addresses = system_lookups.resolve(target.host, target.port)
        except OSError:
            return url
        _refuse_private(addresses)
    return url


async def destination(
    url: str, *, allow_private: bool, lookups: Lookups = system_lookups
) -> Destination:
    """Where an attempt connects: resolved and checked now. AddressRefused
    for a forbidden address, OSError when the name does not resolve."""
    target = parse_url(url)
    addresses = await lookups.resolve_async(target.host, target.port)
    if not allow_private:
        _refuse_private(addresses)
    return Destination(target, addresses[0])


def warn_if_private_allowed(allow_private: bool) -> None:
    """Say at start that the rule above is off (``serve`` and ``worker`` call it)."""
    if allow_private:
        log.warning(
            "MAPAPI_WEBHOOKS_ALLOW_PRIVATE=1: webhook URLs may point to loopback, private "
            "and other internal addresses; use it only where every account is trusted"
        )
