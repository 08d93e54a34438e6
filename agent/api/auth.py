"""Bearer-token authentication for the API and the pages.

* ``Authorization: Bearer <token>`` on any protected route; tokens come from
  the settings (a file mounted from a Kubernetes Secret, or the environment).
* Browsers (an on-call engineer following a Slack link) cannot send a header:
  ``/login`` takes the token once and starts a server-side session
  (:class:`Sessions`): the HttpOnly, SameSite=Lax cookie holds only a random
  id; the server enforces its expiry, ``POST /logout`` revokes it, and a
  session from another token set (the tokens changed) is never accepted. The
  cookie is ``Secure`` when the request came over TLS (directly, or through a
  trusted proxy saying ``X-Forwarded-Proto: https``, see :class:`ProxyTrust`)
  or the public URL is ``https://``. The sign-in and sign-out forms
  carry a CSRF token (double-submit: a random cookie and the same value in the
  form).

Comparisons are constant-time and always walk every configured token, so the
timing says nothing about which token, or how much of one, matched. A missing
or wrong credential is a 401 with ``WWW-Authenticate: Bearer``; pages show
the login form with it.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import SplitResult, urlsplit

from aiohttp import web

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/login", "/logout", "/favicon.ico"})
OPEN_PREFIXES = ("/static/",)
COOKIE = "unstick_session"
CSRF_COOKIE = "unstick_csrf"
SESSION_SECONDS = 12 * 3600
REALM = 'Bearer realm="unstick"'


def _digest(kind: bytes, token: str) -> bytes:
    return hashlib.sha256(kind + b"\0" + token.encode()).digest()


class TokenSet:
    """The accepted tokens, kept only as digests."""

    def __init__(self, tokens: Iterable[str]) -> None:
        tokens = list(tokens)
        self._bearer = [_digest(b"bearer", t) for t in tokens]

    def __len__(self) -> int:
        return len(self._bearer)

    @staticmethod
    def _match(candidate: bytes, accepted: list[bytes]) -> bool:
        ok = False
        for digest in accepted:  # no early exit
            ok |= hmac.compare_digest(candidate, digest)
        return ok

    def check_bearer(self, token: str) -> bool:
        return self._match(_digest(b"bearer", token), self._bearer)

    @property
    def fingerprint(self) -> bytes:
        """Names this set of tokens: sessions started under another set are void."""
        return hashlib.sha256(b"".join(sorted(self._bearer))).digest()


class Sessions:
    """Server-side sign-in sessions: a random id per sign-in, its expiry and the token set it
    was started under, held in this process (at most ``limit``; the oldest go first)."""

    def __init__(
        self,
        *,
        ttl: float = SESSION_SECONDS,
        limit: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.limit = limit
        self._clock = clock
        self._live: OrderedDict[str, tuple[float, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._live)

    def start(self, tokens: TokenSet) -> str:
        session_id = secrets.token_urlsafe(32)
        self._live[session_id] = (self._clock() + self.ttl, tokens.fingerprint)
        while len(self._live) > self.limit:
            self._live.popitem(last=False)
        return session_id

    def valid(self, session_id: str, tokens: TokenSet) -> bool:
        found = self._live.get(session_id)
        if found is None:
            return False
        expires, fingerprint = found
        if expires <= self._clock() or not hmac.compare_digest(fingerprint, tokens.fingerprint):
            del self._live[session_id]
            return False
        return True

    def end(self, session_id: str) -> None:
        self._live.pop(session_id, None)

    def csrf_token(self, session_id: str) -> str:
        """The sign-out form's CSRF token, bound to the session."""
        return hashlib.sha256(b"csrf\0" + session_id.encode()).hexdigest()


def new_csrf_token() -> str:
    return secrets.token_urlsafe(24)


def csrf_ok(cookie: str | None, field: str | None) -> bool:
    return bool(cookie) and bool(field) and hmac.compare_digest(str(cookie), str(field))


def form_token(request: web.Request) -> str:
    """The CSRF token of the pages' forms: bound to the sign-in session when there is one,
    else to this process (the ``--no-auth`` demo), signed with a per-process key."""
    from agent.api.keys import FORM_KEY, SIGNINS, TOKENS

    session = request.cookies.get(COOKIE)
    if session and request.app[SIGNINS].valid(session, request.app[TOKENS]):
        return request.app[SIGNINS].csrf_token(session)
    return hmac.new(request.app[FORM_KEY], b"anonymous", hashlib.sha256).hexdigest()


def cross_site(request: web.Request, *, required: bool = True) -> str | None:
    """Why a state-changing request is not from these pages (None: it is): its ``Origin``,
    else its ``Referer``, must be present (when ``required``), not ``null``, and name this host."""
    origin = request.headers.get("Origin") or request.headers.get("Referer")
    if origin is None:
        if not required:
            return None
        return "a state-changing request needs an Origin or Referer header naming this site"
    if origin.strip().lower() == "null":
        return "a state-changing request from an opaque origin (Origin: null) is refused"
    try:
        netloc = urlsplit(origin).netloc.lower()
    except ValueError:
        netloc = ""
    # The host alone: behind a proxy that terminates TLS the scheme seen here differs.
    if not netloc or netloc != request.host.lower():
        return "cross-site request refused: its Origin is not this site"
    return None


def host_allowed(
    host_header: str, sockname: Any, *, listen_host: str, public: SplitResult | None
) -> bool:
    """Whether ``Host`` names this server: ``localhost``, the listen address or the address the
    connection came in on, at the port it came in on; or the public URL's host and port."""
    try:
        parts = urlsplit("//" + host_header)
        name, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return False
    if public is not None and public.hostname:
        try:
            public_port = public.port or (443 if public.scheme == "https" else 80)
        except ValueError:
            public_port = None
        if name == public.hostname.lower() and (port or (443 if public.scheme == "https" else 80)) == public_port:
            return True
    if not sockname:
        return False
    local_ip, local_port = str(sockname[0]).lower(), int(sockname[1])
    names = {"localhost", "127.0.0.1", "::1", local_ip, listen_host.lower()} - {"", "0.0.0.0", "::"}
    return name in names and (port or 80) == local_port


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


def authenticate(request: web.Request, tokens: TokenSet, sessions: Sessions) -> tuple[bool, str | None]:
    """(authenticated, error) where error is the RFC 6750 error code for the challenge."""
    header = request.headers.get("Authorization")
    if header is not None:
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            return False, "invalid_request"
        return (True, None) if tokens.check_bearer(credentials.strip()) else (False, "invalid_token")
    cookie = request.cookies.get(COOKIE)
    if cookie:
        return (True, None) if sessions.valid(cookie, tokens) else (False, "invalid_token")
    return False, None


class ProxyTrust:
    """Which forwarded headers to believe, and from whom.

    A client writes whatever it likes into ``X-Forwarded-For``; each proxy appends the
    address it received the request from. So the list is read **from the right**, as
    reverse-proxy middlewares do (nginx's ``real_ip_recursive``, Go's
    ``X-Forwarded-For`` guidance, werkzeug's ``ProxyFix``): the headers are believed only
    when the peer itself is a trusted proxy, and the client is the rightmost hop that is
    not one. With ``--trusted-proxies CIDR…`` the trusted proxies are those networks;
    with ``--trust-forwarded-headers`` alone, the peer is taken to be the one proxy in
    front, so the client is the rightmost hop (the one that proxy wrote).
    ``X-Forwarded-Proto`` is read from the right too (what the nearest proxy says)."""

    __slots__ = ("any_peer", "networks")

    def __init__(self, networks: Iterable[str] = (), *, any_peer: bool = False) -> None:
        self.networks = tuple(ipaddress.ip_network(n, strict=False) for n in networks)
        self.any_peer = any_peer and not self.networks

    @property
    def enabled(self) -> bool:
        return self.any_peer or bool(self.networks)

    def _trusted(self, address: str | None) -> bool:
        if not address:
            return False
        try:
            ip = ipaddress.ip_address(address.strip().strip("[]"))
        except ValueError:
            return False
        return any(ip in n for n in self.networks if n.version == ip.version)

    def peer_trusted(self, request: web.Request) -> bool:
        return self.any_peer or self._trusted(request.remote)

    @staticmethod
    def _values(request: web.Request, name: str) -> list[str]:
        return [v.strip() for h in request.headers.getall(name, ()) for v in h.split(",") if v.strip()]

    def client(self, request: web.Request) -> str:
        """The client to rate-limit: the peer, or the rightmost untrusted ``X-Forwarded-For`` hop."""
        peer = request.remote or "unknown"
        if not self.peer_trusted(request):
            return peer
        hops = self._values(request, "X-Forwarded-For")
        if not hops:
            return peer
        if self.any_peer:
            return hops[-1][:64]
        for hop in reversed(hops):
            if not self._trusted(hop):
                return hop[:64]
        return hops[0][:64]  # every hop is a proxy of ours: the leftmost is the origin

    def forwarded_tls(self, request: web.Request) -> bool:
        """Whether a trusted proxy says the browser's connection was TLS."""
        if not self.peer_trusted(request):
            return False
        protos = self._values(request, "X-Forwarded-Proto")
        return bool(protos) and protos[-1].lower() == "https"


def came_over_tls(request: web.Request, *, proxies: ProxyTrust, public_url: str = "") -> bool:
    """Whether the browser's connection is TLS: this server's own, a trusted proxy's
    ``X-Forwarded-Proto``, or an ``https://`` public URL."""
    return request.secure or public_url.startswith("https://") or proxies.forwarded_tls(request)


class FailureLimiter:
    """At most ``burst`` failed authentications per client, refilled at ``per_minute``."""

    def __init__(
        self,
        *,
        burst: int = 10,
        per_minute: float = 10.0,
        limit: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst, self.rate, self.limit, self._clock = burst, per_minute / 60.0, limit, clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def _level(self, client: str) -> float:
        level, at = self._buckets.get(client, (float(self.burst), self._clock()))
        return min(float(self.burst), level + (self._clock() - at) * self.rate)

    def blocked(self, client: str) -> float:
        """Seconds to wait before this client may try again (0: may try now)."""
        level = self._level(client)
        return 0.0 if level >= 1.0 else (1.0 - level) / self.rate

    def failed(self, client: str) -> None:
        self._buckets[client] = (max(0.0, self._level(client) - 1.0), self._clock())
        self._buckets.move_to_end(client)
        while len(self._buckets) > self.limit:
            self._buckets.popitem(last=False)


def challenge(error: str | None) -> str:
    return REALM if error is None else f'{REALM}, error="{error}"'


def safe_next(target: str | None) -> str:
    """A path on this site to go back to after sign-in, never another site: browsers drop tab,
    newline and carriage return from URLs (``/\t/evil`` is ``//evil``) and read ``\\`` as
    ``/``, so any control character, whitespace or backslash, a second leading slash, or
    anything with a scheme or host is refused."""
    default = "/incidents"
    if not target or len(target) > 2048 or not target.startswith("/"):
        return default
    if any(ch in target for ch in "\\ ") or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in target):
        return default
    if target.startswith("//"):
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return default
    return target
