"""LLM endpoints a client names (``llm_config.base_url``): checked once, then reached only at the address
that was checked.

Unchecked, such a URL lets any client make the server call into its own network: loopback services, the
cloud metadata endpoint (169.254.169.254), private ranges. The host is resolved once, off the event loop;
every address it resolves to must be public (unless ``MEMSYS_LLM_ALLOW_PRIVATE_URLS``); the connection then
goes to a checked address, with the hostname kept in the ``Host`` header and the TLS SNI, so a DNS answer
that changes between the check and the connection (DNS rebinding) cannot redirect it. The URL is parsed by
httpx, the parser the LLM client itself uses. The server's own ``MEMSYS_LLM_BASE_URL`` is trusted.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from app.errors import InvalidParameter

FIELD = "llm_config.base_url"
MAX_URL_CHARS = 2048

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class PinnedHost:
    """A client URL's host and the addresses it resolved to when it was checked, in resolution order."""

    host: str
    addresses: tuple[str, ...]


async def pin_client_url(base_url: str, *, allow_private: bool) -> PinnedHost:
    """Check ``base_url`` (http or https, a host, every address public unless ``allow_private``) and resolve
    its host once. ``InvalidParameter`` naming ``llm_config.base_url`` when it cannot be used."""
    url = _parse(base_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        found = await anyio.getaddrinfo(url.host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise _refused(f"host {url.host!r} does not resolve") from exc
    addresses = tuple(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in found))
    if not addresses:
        raise _refused(f"host {url.host!r} does not resolve")
    if not allow_private:
        for address in addresses:
            kind = non_public_kind(ipaddress.ip_address(address))
            if kind:
                raise _refused(
                    f"host {url.host!r} resolves to {address}, a {kind} address "
                    "(MEMSYS_LLM_ALLOW_PRIVATE_URLS=true allows it)"
                )
    return PinnedHost(host=url.host, addresses=addresses)


def non_public_kind(ip: IPAddress) -> str | None:
    """What makes ``ip`` unfit for a client-named endpoint ('loopback', 'private', ...), or None if public."""
    if isinstance(ip, ipaddress.IPv6Address):
        ip = ip.ipv4_mapped or ip.sixtofour or ip  # an IPv4 address wrapped in IPv6 is judged as itself
    for kind in ("loopback", "link_local", "unspecified", "multicast", "reserved", "private"):
        if getattr(ip, f"is_{kind}"):
            return kind.replace("_", "-")
    if isinstance(ip, ipaddress.IPv6Address) and ip in _SITE_LOCAL:
        return "site-local"  # deprecated, but still routed inside some networks; Python calls it global
    return None if ip.is_global else "non-public"


_SITE_LOCAL = ipaddress.ip_network("fec0::/10")


def pinned_http_client(pinned: PinnedHost, timeout_s: float, **options: Any) -> httpx.AsyncClient:
    """An HTTP client that connects only to ``pinned``'s checked addresses and follows no redirect
    (``options``: more ``httpx.AsyncClient`` arguments). No proxy from the environment: a proxy would
    resolve the host again, itself."""
    return httpx.AsyncClient(
        transport=_PinnedTransport(pinned), timeout=timeout_s, follow_redirects=False, trust_env=False, **options
    )


class _PinnedTransport(httpx.AsyncBaseTransport):
    """Sends each request to a checked address of the pinned host (the next one if it refuses the
    connection); ``Host`` stays the URL's (httpx set it from the URL) and TLS verifies the hostname."""

    def __init__(self, pinned: PinnedHost) -> None:
        self._pinned = pinned
        self._transport = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        original = request.url
        if original.host != self._pinned.host:
            raise httpx.ConnectError(f"{original.host!r} is not the checked host", request=request)
        request.extensions = {**request.extensions, "sni_hostname": self._pinned.host}
        refused: httpx.ConnectError | None = None
        try:
            for address in self._pinned.addresses:
                request.url = original.copy_with(host=address)
                try:
                    return await self._transport.handle_async_request(request)
                except httpx.ConnectError as exc:
                    refused = exc
        finally:
            request.url = original
        assert refused is not None  # PinnedHost always has an address
        raise refused

    async def aclose(self) -> None:
        await self._transport.aclose()


def _parse(base_url: str) -> httpx.URL:
    if len(base_url) > MAX_URL_CHARS:
        raise _refused(f"longer than {MAX_URL_CHARS} characters")
    if not base_url.isprintable() or " " in base_url:
        raise _refused("must not contain spaces or control characters")
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise _refused("not a URL") from exc
    if url.scheme not in ("http", "https"):
        raise _refused("must be an http or https URL")
    try:
        host = url.host  # decoded on first use: an invalid punycode label (xn--a.com) fails here
    except UnicodeError as exc:  # the idna package's IDNAError
        raise _refused("its host is not a valid internationalised domain name") from exc
    if not host:
        raise _refused("must name a host")
    return url


def _refused(reason: str) -> InvalidParameter:
    return InvalidParameter(f"Invalid field {FIELD}: {reason}")
