"""Bearer-token authentication for the API and the pages.

* ``Authorization: Bearer <token>`` on any protected route; tokens come from
  the settings (a file mounted from a Kubernetes Secret, or the environment).
* Browsers (an on-call engineer following a Slack link) cannot send a header:
  ``/login`` takes the token once and sets an HttpOnly, SameSite=Lax cookie
  holding a digest of it (not the token itself), accepted in its place.

Comparisons are constant-time and always walk every configured token, so the
timing says nothing about which token, or how much of one, matched. A missing
or wrong credential is a 401 with ``WWW-Authenticate: Bearer``; pages show
the login form with it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from aiohttp import web

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/login", "/logout", "/favicon.ico"})
OPEN_PREFIXES = ("/static/",)
COOKIE = "unstick_session"
REALM = 'Bearer realm="unstick"'


def _digest(kind: bytes, token: str) -> bytes:
    return hashlib.sha256(kind + b"\0" + token.encode()).digest()


class TokenSet:
    """The accepted tokens, kept only as digests."""

    def __init__(self, tokens: Iterable[str]) -> None:
        tokens = list(tokens)
        self._bearer = [_digest(b"bearer", t) for t in tokens]
        self._cookie = [_digest(b"cookie", t) for t in tokens]

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

    def check_cookie(self, value: str) -> bool:
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            return False
        return len(raw) == 32 and self._match(raw, self._cookie)

    def cookie_for(self, token: str) -> str | None:
        """The cookie value for a valid token, else None."""
        return _digest(b"cookie", token).hex() if self.check_bearer(token) else None


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


def authenticate(request: web.Request, tokens: TokenSet) -> tuple[bool, str | None]:
    """(authenticated, error) where error is the RFC 6750 error code for the challenge."""
    header = request.headers.get("Authorization")
    if header is not None:
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            return False, "invalid_request"
        return (True, None) if tokens.check_bearer(credentials.strip()) else (False, "invalid_token")
    cookie = request.cookies.get(COOKIE)
    if cookie:
        return (True, None) if tokens.check_cookie(cookie) else (False, "invalid_token")
    return False, None


def challenge(error: str | None) -> str:
    return REALM if error is None else f'{REALM}, error="{error}"'


def safe_next(target: str | None) -> str:
    """A local path to go back to after login (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/incidents"
    return target
