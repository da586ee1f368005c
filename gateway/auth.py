"""Caller authentication: which key the caller presented, and whether it may call.

Its own module (as Starlette's ``middleware/authentication.py``) so every endpoint that serves a
caller — model calls, stored objects, token counting, model lists — asks the same question the
same way. Two kinds of keys are accepted:

* plain ``[auth]`` keys: a shared list, no identity, no limits (compared in constant time);
* named keys (gateway/keys.py): an identity with limits, found by the SHA-256 of the secret.

Authentication is on as soon as either kind exists. A failure is a 401 ``GatewayError`` that each
endpoint renders in its caller's dialect.
"""

from __future__ import annotations

import hmac
import time

from gateway.asgi import Scope, header
from gateway.errors import GatewayError
from gateway.keys import KeyRing, KeySpec


def caller_key(scope: Scope, query: dict[str, str]) -> str | None:
    """The key the caller presented, in whichever header its dialect uses."""
    auth = header(scope, b"authorization")
    if auth and auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return header(scope, b"x-api-key") or header(scope, b"x-goog-api-key") or query.get("key")


def _missing() -> GatewayError:
    return GatewayError("authentication", "missing API key: send the gateway key in your SDK's usual header", 401)


def check_auth(keys: list[str], scope: Scope, query: dict[str, str]) -> None:
    """Plain keys only (kept for callers of the old interface)."""
    if not keys:
        return
    presented = caller_key(scope, query)
    if presented is None:
        raise _missing()
    if not _plain_match(keys, presented):
        raise GatewayError("authentication", "invalid API key", 401)


def _plain_match(keys: list[str], presented: str) -> bool:
    presented_b = presented.encode()
    ok = False
    for key in keys:  # constant time per key, and every key is compared
        ok |= hmac.compare_digest(presented_b, key.encode())
    return ok


class Authenticator:
    def __init__(self, plain: list[str], ring: KeyRing) -> None:
        self.plain = plain
        self.ring = ring

    @property
    def required(self) -> bool:
        return bool(self.plain) or self.ring.any

    def authenticate(self, scope: Scope, query: dict[str, str]) -> KeySpec | None:
        """The named key of this request, None for a plain key (or when auth is off); else 401."""
        if not self.plain and not self.ring.any:
            return None
        presented = caller_key(scope, query)
        if presented is None:
            raise _missing()
        spec = self.ring.lookup(presented)
        if spec is not None:
            if spec.revoked:
                raise GatewayError("authentication", f"API key {spec.name!r} was revoked", 401)
            if spec.expires_ts is not None and time.time() >= spec.expires_ts:
                raise GatewayError("authentication", f"API key {spec.name!r} expired at {spec.expires_at}", 401)
            return spec
        if self.plain and _plain_match(self.plain, presented):
            return None
        raise GatewayError("authentication", "invalid API key", 401)
