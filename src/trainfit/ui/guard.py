"""What keeps `trainfit ui` a page for this machine's user: who may talk to it, and how much they may send.

The calculator has no login, so every request is checked before any route sees it (an ASGI middleware):
- Host must name the address it was started on (127.0.0.1 / localhost / [::1] with its port, or the exact --host):
  a DNS-rebinding page (evil.example resolving to 127.0.0.1) sends its own name and is refused (403);
- Origin, when a browser sends it on an API call or a POST, must be the page's own origin, http://<Host>: another
  site's page cannot drive the calculator from the user's browser (403);
- API POSTs must be `Content-Type: application/json` (415): a cross-site HTML form or a "simple" fetch can only send
  text/plain, urlencoded or multipart, so it never reaches the handlers even without an Origin header;
- a Content-Length over the cap is refused before anything is read (413); app._form reads the body as a stream and
  stops at the cap, so a chunked body without a length is never held in memory past it.
Plus the bound on the disk cache that pasted config.json files fill (prune_cache) and the CLI's socket and warning.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
from typing import Any

from ..errors import SpecError
from ..i18n import say

MAX_BODY = 1_000_000  # bytes of one request: a config.json is a few KB
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
TEST_NAMES = frozenset({"testserver"})  # Starlette's TestClient: create_app() with no address is the in-process app
WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# The structure cache pasted configs fill (catalog/generic.py writes one file per config): oldest files go first.
CACHE_MAX_FILES = 256  # as catalog/generic.py's own bound; a test may lower these
CACHE_MAX_BYTES = 64 * 2**20


class BodyTooLarge(SpecError):
    """A request body over MAX_BODY: answered 413."""


class Refused(SpecError):
    """A request the guard refuses; `status` is its HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def too_large(size: int | None = None) -> BodyTooLarge:
    if size is None:
        return BodyTooLarge(say("ec_ui_too_large_over", limit=MAX_BODY))
    return BodyTooLarge(say("ec_ui_too_large", size=size))


# ---- addresses ------------------------------------------------------------------------------------------------------
def _name(host: str) -> str:
    """A host as it appears in a Host header: lower case, an IPv6 address in brackets."""
    host = host.strip().lower()
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """True when --host reaches this machine only (127.0.0.0/8, ::1, localhost or a name resolving only to those)."""
    name = host.strip().strip("[]").lower()
    if name in WILDCARDS:
        return False
    if name == "localhost":
        return True
    ip = _ip(name)
    if ip is not None:
        return ip.is_loopback
    try:
        addrs = {info[4][0] for info in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        return False
    return bool(addrs) and all((_ip(a.split("%")[0]) or ipaddress.ip_address("0.0.0.0")).is_loopback for a in addrs)


def split_host(value: str) -> tuple[str, int | None] | None:
    """A Host header (or an origin's authority) as (name, port); None when it is not one."""
    value = value.strip().lower()
    if not value or any(c in value for c in "/@?# \t\\"):
        return None
    if value.startswith("["):
        name, sep, rest = value.partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        name, port = name + "]", rest[1:]
    else:
        name, _, port = value.partition(":")
    if not name:
        return None
    if not port:
        return name, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return name, int(port)


class Address:
    """The names and port a request's Host header may carry."""

    def __init__(self, host: str | None = None, port: int | None = None):
        self.port = port
        self.any_ip = False
        if host is None:  # the in-process app (tests): the loopback names and the test client's, on any port
            self.names = LOOPBACK_NAMES | TEST_NAMES
        elif host.strip().lower() in WILDCARDS:  # every interface: this machine's names and its addresses
            self.names = LOOPBACK_NAMES | {_name(n) for n in (socket.gethostname(), socket.getfqdn()) if n}
            self.any_ip = True  # an address in the URL is not a DNS name an attacker controls
        elif is_loopback(host):
            self.names = LOOPBACK_NAMES | {_name(host)}
        else:
            self.names = frozenset({_name(host)})

    def allows(self, host_header: str | None) -> bool:
        parsed = split_host(host_header or "")
        if parsed is None:
            return False
        name, port = parsed
        if self.port is not None and (port if port is not None else 80) != self.port:
            return False
        return name in self.names or (self.any_ip and _ip(name) is not None)

    def shown(self) -> str:
        name = "127.0.0.1" if "127.0.0.1" in self.names else sorted(self.names)[0]
        return f"http://{name}:{self.port}/" if self.port else f"http://{name}/"


# ---- the middleware -------------------------------------------------------------------------------------------------
def _headers(scope: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in scope.get("headers") or ():
        key = k.decode("latin-1").lower()
        if key in out:  # a repeated Host, Origin or Content-Length is refused below as not matching
            out[key] = out[key] + "," + v.decode("latin-1")
        else:
            out[key] = v.decode("latin-1")
    return out


def check(method: str, path: str, headers: dict[str, str], address: Address) -> None:
    """Raise Refused (403, 415) or BodyTooLarge (413) for a request the calculator must not serve."""
    host = headers.get("host")
    if not address.allows(host):
        raise Refused(403, say("ec_ui_forbidden_host", host=host or "", address=address.shown()))
    api = path.startswith("/api/")
    origin = headers.get("origin")
    if origin is not None and (api or method not in SAFE_METHODS):
        scheme, sep, authority = origin.strip().lower().partition("://")
        if not (sep and scheme == "http" and split_host(authority) == split_host(host or "")):
            raise Refused(403, say("ec_ui_forbidden_origin", origin=origin))
    if method not in SAFE_METHODS:
        length = headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                raise Refused(400, say("ec_ui_bad_length", length=length))
            if int(length) > MAX_BODY:
                raise too_large(int(length))
        if api:
            kind = (headers.get("content-type") or "").split(";")[0].strip().lower()
            if kind != "application/json":
                raise Refused(415, say("ec_ui_content_type", kind=kind or "none"))


class Guard:
    """ASGI middleware: check() on every HTTP request; a refusal is one JSON error line, in the URL's language."""

    def __init__(self, app, host: str | None = None, port: int | None = None):
        self.app, self.address = app, Address(host, port)

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        try:
            check(scope.get("method", "GET").upper(), scope.get("path", ""), _headers(scope), self.address)
        except SpecError as exc:
            from urllib.parse import parse_qs

            from .responses import _known_lang, error_response

            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            lang = _known_lang((query.get("lang") or ["en"])[0])
            status = exc.status if isinstance(exc, Refused) else 413
            response = error_response(exc, status, lang)
            response.headers["Connection"] = "close"  # the body it did not read is not kept on the connection
            return await response(scope, receive, send)
        return await self.app(scope, receive, send)


# ---- the disk cache of pasted configs -------------------------------------------------------------------------------
def cache_dir() -> str:
    from ..catalog.generic import _cache_file

    return os.path.dirname(_cache_file(""))


def prune_cache(max_files: int | None = None, max_bytes: int | None = None, folder: str | None = None) -> int:
    """The structure cache within this page's caps (catalog.generic.prune_cache, which every cache write also runs
    with its own): the oldest files go; returns how many went."""
    from ..catalog.generic import prune_cache as prune

    return prune(CACHE_MAX_FILES if max_files is None else max_files,
                 CACHE_MAX_BYTES if max_bytes is None else max_bytes, folder or cache_dir())


# ---- the command ----------------------------------------------------------------------------------------------------
EXPOSED = {
    "en": "trainfit ui: warning: --host {host} is not this machine only: anyone on the network who can reach "
          "port {port} can use the calculator (there is no authentication); use --host 127.0.0.1 to keep it local",
    "zh": "trainfit ui：警告：--host {host} 不只限于本机：网络上能访问端口 {port} 的任何人都可以使用此计算器"
          "（没有身份验证）；用 --host 127.0.0.1 只在本机使用",
}


def exposure_warning(host: str, port: int, lang: str = "en") -> str | None:
    """The one-line warning `trainfit ui` prints when --host is reachable from other machines, else None."""
    if is_loopback(host):
        return None
    return EXPOSED.get(lang, EXPOSED["en"]).format(host=host, port=port)


def bind(host: str, port: int) -> socket.socket:
    """The listening address, bound now, so that a port in use is one clear error before anything is printed."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise SpecError(say("ec_ui_not_an_address", host=host, why=why)) from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a TIME_WAIT port is free
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise SpecError(say("ec_ui_port_in_use", port=port, host=host)) from None
        raise SpecError(say("ec_ui_cannot_listen", host=host, port=port, why=exc.strerror or str(exc))) from None
    return sock
