"""Caller authentication: which key the caller presented, and whether it may call.

Its own module (as Starlette's ``middleware/authentication.py``) so every endpoint that serves a
caller — model calls, stored objects, token counting, model lists — asks the same question the
same way. Two kinds of keys are accepted:

* plain ``[auth]`` keys: a shared list, no identity, no limits (compared in constant time);
* named keys (gateway/governance/keys.py): an identity with limits, found by the SHA-256 of the secret.

Authentication is on as soon as either kind exists. A failure is a 401 ``GatewayError`` that each
endpoint renders in its caller's dialect. A named key this replica does not know yet (made on
another replica a moment ago) is looked up in the ``[store]`` first, within a bound
(gateway/governance/key_lookup.py).
"""

from __future__ import annotations

import hmac
import time
from typing import Any
from urllib.parse import parse_qsl

from gateway.asgi import Scope
from gateway.errors import GatewayError
from gateway.governance.key_lookup import UnknownKeys
from gateway.governance.keys import KeyRing, KeySpec, hash_key

CREDENTIAL_HEADERS = (b"authorization", b"x-api-key", b"x-goog-api-key")


def caller_key(scope: Scope, query: dict[str, str]) -> str | None:
    """The key the caller presented, in whichever header its dialect uses.

    Every place a key can travel is read (each header every time it occurs, and ``?key=``): two
    different values are a 401, never "the first one wins", so a proxy or client that adds its own
    credential cannot have it silently preferred or ignored."""
    found: set[str] = set()
    for name, value in scope["headers"]:
        if name in CREDENTIAL_HEADERS:
            text = value.decode("latin-1").strip()
            if name == b"authorization":
                if text[:7].lower() != "bearer ":
                    continue
                text = text[7:].strip()
            if text:
                found.add(text)
    raw_query = scope.get("query_string", b"")
    if b"key=" in raw_query:
        found.update(v for k, v in parse_qsl(raw_query.decode("latin-1")) if k == "key" and v)
    elif query.get("key"):
        found.add(query["key"])
    if len(found) > 1:
        raise GatewayError("authentication", "two different API keys in one request: send the gateway key once", 401)
    return next(iter(found), None)


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
        self.store: Any = None  # the [store], once the server started: unknown keys are looked up there
        self.unknown = UnknownKeys()

    @property
    def required(self) -> bool:
        return bool(self.plain) or self.ring.any

    async def authenticate(self, scope: Scope, query: dict[str, str]) -> KeySpec | None:
        """The named key of this request, None for a plain key (or when auth is off); else 401."""
        if not self.plain and not self.ring.any:
            return None
        presented = caller_key(scope, query)
        if presented is None:
            raise _missing()
        spec = self.ring.lookup(presented)
        if spec is None:
            if self.plain and _plain_match(self.plain, presented):
                return None
            spec = await self._from_store(presented)
            if spec is None:
                raise GatewayError("authentication", "invalid API key", 401)
        if spec.revoked:
            raise GatewayError("authentication", f"API key {spec.name!r} was revoked", 401)
        if spec.expires_ts is not None and time.time() >= spec.expires_ts:
            raise GatewayError("authentication", f"API key {spec.name!r} expired at {spec.expires_at}", 401)
        return spec

    async def _from_store(self, presented: str) -> KeySpec | None:
        """A key made on another replica since this one last read the store (bounded lookups)."""
        if self.store is None:
            return None
        sha = hash_key(presented)
        if not await self.unknown.reload_for(sha, self.ring, self.store):
            return None
        spec = self.ring.lookup(presented)
        if spec is None:
            self.unknown.still_unknown(sha)
        return spec
