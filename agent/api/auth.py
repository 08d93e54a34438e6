"""Bearer-token authentication for the API and the pages.

* ``Authorization: Bearer <token>`` on any protected route; tokens come from
  the settings (a file mounted from a Kubernetes Secret, or the environment).
* Browsers (an on-call engineer following a Slack link) cannot send a header:
  ``/login`` takes the token once and starts a server-side session
  (:class:`Sessions`): the HttpOnly, SameSite=Lax cookie holds only a random
  id; the server enforces its expiry, ``POST /logout`` revokes it, and a
  session from another token set (the tokens changed) is never accepted. The
  cookie is ``Secure`` when the request came over TLS (directly, or through a
  proxy saying ``X-Forwarded-Proto: https`` when ``--trust-forwarded-headers``
  is on) or the public URL is ``https://``. The sign-in and sign-out forms
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
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

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


def came_over_tls(request: web.Request, *, trust_forwarded: bool, public_url: str = "") -> bool:
    """Whether the browser's connection is TLS: this server's own, a proxy's ``X-Forwarded-Proto``
    (only when told to trust it), or an ``https://`` public URL."""
    if request.secure or public_url.startswith("https://"):
        return True
    if trust_forwarded:
        proto = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
        return proto == "https"
    return False


def client_address(request: web.Request, *, trust_forwarded: bool) -> str:
    """The client to rate-limit: the peer, or the first ``X-Forwarded-For`` hop when trusted."""
    if trust_forwarded:
        forwarded = request.headers.get("X-Forwarded-For", "").split(",")[0].strip()
        if forwarded:
            return forwarded[:64]
    return request.remote or "unknown"


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
