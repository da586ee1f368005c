"""Named caller keys: who is calling, and with which limits.

A key comes from the config file (``[[keys]]``, the secret in an env var or only its SHA-256 in
the file) or from the admin API (the secret is generated, shown once, and stored only as its
SHA-256). Both end up as one ``KeySpec`` in a ``KeyRing``, looked up by the SHA-256 of what the
caller presented: one hash and one dict lookup per request, and no secret kept in memory for
admin-created keys.

Changes made through the admin API (new keys, limit changes, revocations, also of a key from the
file) are records in the ``[store]``; every replica reloads them when the store's key version
changes, which it polls every ``REFRESH_SECONDS`` — so a revocation holds everywhere within a
second. A store record of a key from the file wins over the file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gateway.settings import KeySettings

log = logging.getLogger("gateway.keys")

REFRESH_SECONDS = 0.5
PERIODS = ("day", "week", "month", "total")
# the settings a key record may carry (admin API bodies are checked against this)
LIMIT_FIELDS = (
    "models",
    "budget_usd",
    "budget_period",
    "rpm",
    "tpm",
    "max_parallel",
    "expires_at",
    "refuse_unpriced",
    "mcp_tools",
)


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> str:
    return "gwk-" + secrets.token_urlsafe(32)


def parse_time(value: str | None) -> float | None:
    """ISO 8601 (``Z`` allowed; no zone means UTC) → epoch seconds."""
    if value is None or value == "":
        return None
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        from datetime import UTC

        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


@dataclass(slots=True)
class KeySpec:
    """One named key's identity and limits, as the relay and the limiter read them."""

    name: str
    sha256: str | None
    models: tuple[str, ...] | None = None
    budget_usd: float | None = None
    budget_period: str = "month"
    rpm: int | None = None
    tpm: int | None = None
    max_parallel: int | None = None
    expires_at: str | None = None
    refuse_unpriced: bool = False
    mcp_tools: tuple[str, ...] | None = None  # MCP tool globs (gateway/mcp/); None = no MCP tool
    source: str = "config"  # config | admin
    revoked: bool = False
    created_at: float | None = None
    expires_ts: float | None = field(default=None, repr=False)

    @property
    def limited(self) -> bool:
        """Whether a request under this key must go through the store before the upstream."""
        return (
            self.budget_usd is not None or self.rpm is not None or self.tpm is not None or self.max_parallel is not None
        )

    def allows(self, model: str) -> bool:
        if self.models is None:
            return True
        from fnmatch import fnmatchcase

        return any(fnmatchcase(model, glob) for glob in self.models)

    def allows_tool(self, tool: str) -> bool:
        """Whether this key may list and call the MCP tool ``tool`` (``<server>_<tool>``): its
        ``mcp_tools`` globs; none set = no tool (a key made for models sees no tools unasked)."""
        if not self.mcp_tools:
            return False
        from fnmatch import fnmatchcase

        return any(fnmatchcase(tool, glob) for glob in self.mcp_tools)

    def public(self) -> dict[str, Any]:
        """The key's settings for the admin API: never the secret, nor its hash."""
        return {
            "name": self.name,
            "models": list(self.models) if self.models is not None else None,
            "budget_usd": self.budget_usd,
            "budget_period": self.budget_period,
            "rpm": self.rpm,
            "tpm": self.tpm,
            "max_parallel": self.max_parallel,
            "expires_at": self.expires_at,
            "refuse_unpriced": self.refuse_unpriced,
            "mcp_tools": list(self.mcp_tools) if self.mcp_tools is not None else None,
            "source": self.source,
            "revoked": self.revoked,
        }


def validate_limits(body: dict[str, Any], partial: bool) -> dict[str, Any]:
    """The limit fields of an admin API body, checked; raises ValueError with what is wrong."""
    out: dict[str, Any] = {}
    for name, value in body.items():
        if name not in LIMIT_FIELDS:
            if name in ("name", "key") and not partial:
                continue
            raise ValueError(f"unknown field {name!r}: expected one of {', '.join(LIMIT_FIELDS)}")
        if value is None:
            out[name] = None
        elif name == "models":
            if not isinstance(value, list) or not all(isinstance(m, str) and m for m in value):
                raise ValueError("models must be a list of route names (globs allowed)")
            out[name] = value
        elif name == "mcp_tools":
            if not isinstance(value, list) or not all(isinstance(m, str) and m for m in value):
                raise ValueError("mcp_tools must be a list of MCP tool names <server>_<tool> (globs allowed)")
            out[name] = value
        elif name == "budget_usd":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError("budget_usd must be a number >= 0")
            out[name] = float(value)
        elif name == "budget_period":
            if value not in PERIODS:
                raise ValueError(f"budget_period must be one of {', '.join(PERIODS)}")
            out[name] = value
        elif name in ("rpm", "tpm", "max_parallel"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1")
            out[name] = value
        elif name == "expires_at":
            try:
                parse_time(value)
            except (TypeError, ValueError):
                raise ValueError("expires_at must be an ISO 8601 time such as 2027-06-30T00:00:00Z") from None
            out[name] = value
        elif name == "refuse_unpriced":
            if not isinstance(value, bool):
                raise ValueError("refuse_unpriced must be true or false")
            out[name] = value
    return out


def _spec(name: str, sha: str | None, fields: dict[str, Any], source: str) -> KeySpec:
    models = fields.get("models")
    mcp_tools = fields.get("mcp_tools")
    spec = KeySpec(
        name=name,
        sha256=sha,
        models=tuple(models) if models is not None else None,
        budget_usd=fields.get("budget_usd"),
        budget_period=fields.get("budget_period") or "month",
        rpm=fields.get("rpm"),
        tpm=fields.get("tpm"),
        max_parallel=fields.get("max_parallel"),
        expires_at=fields.get("expires_at"),
        refuse_unpriced=bool(fields.get("refuse_unpriced", False)),
        mcp_tools=tuple(mcp_tools) if mcp_tools is not None else None,
        source=source,
        revoked=bool(fields.get("revoked", False)),
        created_at=fields.get("created_at"),
    )
    spec.expires_ts = parse_time(spec.expires_at)
    return spec


class KeyRing:
    """Every named key of this gateway: the file's, overlaid with the store's records."""

    def __init__(self, configured: list[KeySettings]) -> None:
        self._configured: dict[str, tuple[str | None, dict[str, Any]]] = {}
        for k in configured:
            sha = k.key_sha256.lower() if k.key_sha256 else None
            if k.key_env:
                secret = os.environ.get(k.key_env)
                sha = hash_key(secret) if secret else None
                if not secret:
                    log.warning("key %r: $%s is not set; the key cannot be used", k.name, k.key_env)
            self._configured[k.name] = (sha, k.model_dump(exclude={"name", "key_env", "key_sha256"}))
        self.version: int | None = None
        self.by_name: dict[str, KeySpec] = {}
        self._by_hash: dict[str, KeySpec] = {}
        self.load({})

    @property
    def any(self) -> bool:
        """Whether callers must authenticate because named keys exist."""
        return bool(self.by_name)

    def load(self, records: dict[str, dict[str, Any]]) -> None:
        """Rebuild from the store's records (name → record)."""
        by_name: dict[str, KeySpec] = {}
        for name, (sha, fields) in self._configured.items():
            record = records.get(name)
            if record is not None:
                fields = {**fields, **{k: v for k, v in record.items() if k in LIMIT_FIELDS or k == "revoked"}}
                sha = record.get("sha256") or sha
            by_name[name] = _spec(name, sha, fields, "config")
        for name, record in records.items():
            if name not in by_name and record.get("sha256"):
                by_name[name] = _spec(name, record["sha256"], record, "admin")
        self.by_name = by_name
        self._by_hash = {s.sha256: s for s in by_name.values() if s.sha256}

    def lookup(self, secret: str) -> KeySpec | None:
        """The key whose secret was presented (revoked and expired ones too: the caller says which)."""
        if not self._by_hash:
            return None
        return self._by_hash.get(hash_key(secret))

    def is_configured(self, name: str) -> bool:
        return name in self._configured

    async def refresh(self, store: Any) -> bool:
        """Reload if the store's key version moved; True when something changed."""
        version = await store.key_version()
        if version == self.version:
            return False
        records = await store.key_records()
        self.load(records)
        self.version = version
        return True


def expired(spec: KeySpec, now: float | None = None) -> bool:
    return spec.expires_ts is not None and (now if now is not None else time.time()) >= spec.expires_ts
