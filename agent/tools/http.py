"""The http_get tool: GET a public http(s) URL, and nothing else.

It refuses non-public addresses (after DNS, and again on every redirect) and connects to the
very address it checked, so a second DNS answer cannot redirect the connection (rebinding).
Every call has one overall deadline (a watchdog shuts its sockets) and a body cap on the decoded
bytes, which decoding never passes (`http_decoding.py`). Plugins call `fetch` for the same checks.

httpx is imported inside the functions that use it: a cycle that never fetches never loads it.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from typing import TYPE_CHECKING, Callable
from urllib.parse import unquote

from agent.config import Settings
from agent.secrets import REDACTED, Secrets
from agent.tools.base import ToolContext, ToolError
from agent.tools.http_decoding import BoundedDecoder, layers

if TYPE_CHECKING:
    import socket

    import httpx

# Refused even when http_allow_networks covers them: instance metadata hands out credentials.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        "169.254.170.2",  # AWS ECS task credentials
        "169.254.170.23",  # AWS EKS pod identity
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::23",  # AWS EKS pod identity over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure wire server
    )
)

_NAT64 = ipaddress.ip_network("64:ff9b::/96")

# Certificate verification for https (the system's CAs); tests point it at their own CA.
TLS_VERIFY: object = True

Resolver = Callable[[str, int], list[str]]


def http_get(ctx: ToolContext, url: str) -> str:
    """Fetch a public http(s) URL and return its status and text (redirects followed, size capped).

    Args:
        url: the full URL, e.g. "https://example.com/"
    """
    refuse_secret_in_url(url, ctx.secrets)
    hops: list[str] = []
    try:
        return fetch(url, ctx.settings, resolve_host, ctx.secrets, hops)
    finally:  # the page comes from where the redirects led, not only from the URL asked for
        for host in hops if ctx.origins is not None else ():
            ctx.origins.add({"origin": "http", "host": host})


class _NotResolved(Exception):
    """The precheck's resolver: a host name is looked up only when the call runs."""


def _not_resolved(host: str, port: int) -> list[str]:
    raise _NotResolved(host)


def http_precheck(ctx: ToolContext, url: str) -> None:
    """What http_get refuses before any request: a secret in the URL, a bad URL or scheme, a
    literal address that is not public. No DNS query (it would reach the network unapproved)."""
    import httpx

    refuse_secret_in_url(url, ctx.secrets)
    try:
        parsed = httpx.URL(url)
    except Exception as exc:
        raise ToolError(f"not a valid URL: {exc}") from None
    try:
        checked_target(parsed, ctx.settings, _not_resolved, ctx.secrets)
    except _NotResolved:
        pass


def refuse_secret_in_url(url: object, secrets: Secrets | None) -> None:
    """A ToolError when `url` carries a secret in any form Secrets.found_in detects (raw,
    percent-encoded, base64, hex, reversed; in the path, query, userinfo or fragment). Runs
    before the first request and again on every redirect, so a server cannot bounce the agent
    to a URL that carries the key. The message never repeats the URL. The dispatcher has already
    replaced any secret in the model's arguments by [REDACTED]: such a URL is refused too, so a
    collector learns nothing, not even that a call was tried."""
    if REDACTED in unquote(str(url)):
        raise ToolError("refused: the URL carried a secret (redacted before the call); http_get never sends one")
    kind = secrets.found_in(str(url)) if secrets else None
    if kind:
        raise ToolError(f"refused: the URL carries a secret ({kind} form); http_get never sends one")


# ---------------------------------------------------------------------------- which addresses


def _embedded_ipv4(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list:
    """IPv4 addresses hidden inside an IPv6 one (mapped, 6to4, Teredo, NAT64)."""
    if ip.version != 6:
        return []
    found = [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())]
    if ip in _NAT64:
        found.append(ipaddress.ip_address(int(ip) & 0xFFFFFFFF))
    return [a for a in found if a is not None]


def address_problem(address: str, allowed_networks: list[str]) -> str | None:
    """Why http_get may not connect to this IP address, or None when it may."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    for candidate in [ip, *_embedded_ipv4(ip)]:
        if candidate in METADATA_ADDRESSES:
            return f"{address} is a cloud metadata address"
    if any(ip in ipaddress.ip_network(n, strict=False) for n in allowed_networks):
        return None
    for candidate in [*_embedded_ipv4(ip), ip]:  # the embedded IPv4 address names the problem best
        for kind in ("loopback", "link_local", "multicast", "unspecified", "reserved", "private"):
            if getattr(candidate, f"is_{kind}"):
                return f"{address} is a {kind.replace('_', '-')} address"
        if not candidate.is_global:
            return f"{address} is not a public address"
    return None


def resolve_host(host: str, port: int) -> list[str]:
    """Every IP address a host name resolves to (the system resolver)."""
    import socket  # here, not at the top: a cycle that fetches nothing never imports it

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ToolError(f"cannot resolve {host}: {exc}") from None
    return list(dict.fromkeys(info[4][0] for info in infos))


def checked_target(url: httpx.URL, settings: Settings, resolver: Resolver, secrets: Secrets) -> tuple[str, str]:
    """(IP to connect to, Host header) for a URL, or a ToolError saying why it is refused
    (a URL that carries a secret included: this runs for the first URL and every redirect).

    Every address the name resolves to must pass; the request then goes to that exact address,
    so a second, different DNS answer (rebinding) cannot redirect the connection.
    """
    refuse_secret_in_url(url, secrets)
    if url.scheme not in ("http", "https"):
        raise ToolError(f"only http and https URLs are allowed, not '{url.scheme or 'none'}:'")
    host = url.raw_host.decode("ascii")  # IDNA-encoded: what DNS and TLS see
    if not host:
        raise ToolError(f"URL '{url}' has no host")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        addresses = resolver(host, port)
    if not addresses:
        raise ToolError(f"{host} resolves to no address")
    for address in addresses:
        problem = address_problem(address, settings.http_allow_networks)
        if problem:
            via = "" if host == address else f"{host} resolves to {address}: "
            raise ToolError(f"refused {url}: {via}{problem}; http_get only reaches public addresses")
    return addresses[0], url.netloc.decode("ascii")


# ---------------------------------------------------------------------------------- the request


class _Deadline:
    """One http_get's deadline, held by a watchdog: when the time is up it shuts down the call's
    sockets, which ends any read at once. (httpx's timeouts apply to each socket read, so a
    server dripping one header byte a second would otherwise keep the call alive for ever.)"""

    def __init__(self, seconds: float):
        self.at = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def trace(self, event: str, info: dict) -> None:
        """httpcore's trace hook: note each new connection's socket."""
        if event == "connection.connect_tcp.complete":
            sock = info["return_value"].get_extra_info("socket")
            with self._lock:
                self._sockets.append(sock)
                if self.expired:
                    _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    import socket

    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


def fetch(
    url: str,
    settings: Settings,
    resolver: Resolver = resolve_host,
    secrets: Secrets | None = None,
    hops: list[str] | None = None,
) -> str:
    """GET `url` with every safety check of http_get; returns the status line and the body.
    The whole call, redirects, headers and body included, ends by `http_timeout`. `secrets`: the
    cycle's (`ctx.secrets`), which no URL may carry; None: the settings' own, read once. `hops`: given,
    the host of each redirect's target is appended to it as the redirect is followed."""
    import httpx

    secrets = Secrets.from_settings(settings) if secrets is None else secrets
    timed_out = f"timed out after {settings.http_timeout:g}s"
    try:
        current = httpx.URL(url)
    except Exception as exc:
        raise ToolError(f"not a valid URL: {exc}") from None
    deadline = _Deadline(settings.http_timeout)
    try:
        with httpx.Client(trust_env=False, follow_redirects=False, verify=TLS_VERIFY) as client:  # no proxies
            for _hop in range(settings.http_max_redirects + 1):
                address, host_header = checked_target(current, settings, resolver, secrets)
                remaining = deadline.remaining()
                if remaining <= 0:
                    raise ToolError(timed_out)
                request = client.build_request(
                    "GET",
                    current.copy_with(host=address),
                    headers={"Host": host_header, "Accept-Encoding": "identity", "User-Agent": "scratchpad-agent"},
                    timeout=remaining,  # connect, pool and each read; the watchdog bounds them all
                    extensions={
                        "sni_hostname": current.raw_host.decode("ascii"),  # TLS checks the name's certificate
                        "trace": deadline.trace,
                    },
                )
                try:
                    response = client.send(request, stream=True)
                except httpx.HTTPError as exc:
                    if deadline.expired or isinstance(exc, httpx.TimeoutException):
                        raise ToolError(timed_out) from None
                    raise ToolError(f"request to {current} failed: {exc}") from None
                try:
                    location = response.headers.get("location")
                    if response.status_code in (301, 302, 303, 307, 308) and location:
                        try:
                            current = current.join(location)
                        except Exception as exc:
                            raise ToolError(f"bad redirect Location {location!r}: {exc}") from None
                        if hops is not None:
                            hops.append(current.raw_host.decode("ascii", "backslashreplace"))  # IDNA: xn--…
                        continue
                    return _read_body(response, current, settings, deadline)
                finally:
                    response.close()
    finally:
        deadline.cancel()
    raise ToolError(f"more than {settings.http_max_redirects} redirects; stopped at {current}")


def _read_body(response: httpx.Response, url: httpx.URL, settings: Settings, deadline: _Deadline) -> str:
    import httpx

    cap = settings.http_max_bytes
    timed_out = f"timed out after {settings.http_timeout:g}s while reading {url}"
    decoder = BoundedDecoder(layers(response.headers.get("content-encoding")), cap + 1)
    try:
        body, cut = _read_capped(response, decoder, cap, deadline, timed_out)
    except httpx.TimeoutException:
        raise ToolError(timed_out) from None
    except httpx.HTTPError as exc:
        if deadline.expired:
            raise ToolError(timed_out) from None
        raise ToolError(f"reading {url} failed: {exc}") from None
    if deadline.expired and not cut:  # the watchdog's shutdown looked like the end of the body
        raise ToolError(timed_out)
    text = _body_text(body, response.charset_encoding)
    kind = response.headers.get("content-type", "unknown type")
    head = f"HTTP {response.status_code} {response.reason_phrase} ({kind}) from {url}"
    if cut:
        text += f"\n[body cut at {cap} bytes; the rest was not read]"
    return f"{head}\n{text}"


def _read_capped(
    response: httpx.Response, decoder: BoundedDecoder, cap: int, deadline: _Deadline, timed_out: str
) -> tuple[bytearray, bool]:
    """(the decoded body, at most `cap` bytes; whether it was cut there). Reading stops at the cap,
    decoded or raw, or when the decoder is full; ToolError(timed_out) once the deadline passes."""
    body, raw_read = bytearray(), 0
    for chunk in response.iter_raw():  # undecoded: the decoder is bounded, httpx's is not
        raw_read += len(chunk)
        body += decoder.feed(chunk)
        if len(body) > cap or raw_read > cap:  # decoded or not, never more than the cap
            del body[cap:]
            return body, True  # stop reading and decoding: the rest never leaves the socket
        if decoder.full:
            break
        if deadline.expired:
            raise ToolError(timed_out)
    return body, False


def _body_text(body: bytearray, charset: str | None) -> str:
    """The body as text in its declared charset (UTF-8 when none, or one Python does not know)."""
    try:
        return bytes(body).decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return bytes(body).decode("utf-8", errors="replace")
