"""Small helpers every codec shares: typed field access that fails with a 400, ids, warnings.

Parsers call ``get_str`` / ``get_int`` / … instead of indexing dicts directly, so a wrong type in a
caller's body becomes a clear ``invalid_request`` naming the field, never a 500.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

import orjson

from gateway.errors import invalid
from gateway.random_ids import random_hex

log = logging.getLogger("gateway.dialects")

_MISSING = object()


def _type_error(path: str, expected: str, value: Any) -> Exception:
    return invalid(f"{path}: expected {expected}, got {type(value).__name__}", param=path)


def get_str(obj: dict[str, Any], key: str, path: str, *, required: bool = False) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise invalid(f"{path}: field required", param=path)
        return None
    if not isinstance(value, str):
        raise _type_error(path, "a string", value)
    return value


def get_int(
    obj: dict[str, Any], key: str, path: str, *, required: bool = False, minimum: int | None = None
) -> int | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise invalid(f"{path}: field required", param=path)
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise _type_error(path, "an integer", value)
    if minimum is not None and value < minimum:
        raise invalid(f"{path}: must be >= {minimum}", param=path)
    return value


def get_float(obj: dict[str, Any], key: str, path: str) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _type_error(path, "a number", value)
    return float(value)


def get_bool(obj: dict[str, Any], key: str, path: str) -> bool | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise _type_error(path, "a boolean", value)
    return value


def get_list(obj: dict[str, Any], key: str, path: str, *, required: bool = False) -> list[Any]:
    value = obj.get(key)
    if value is None:
        if required:
            raise invalid(f"{path}: field required", param=path)
        return []
    if not isinstance(value, list):
        raise _type_error(path, "an array", value)
    return value


def get_dict(obj: dict[str, Any], key: str, path: str, *, required: bool = False) -> dict[str, Any] | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise invalid(f"{path}: field required", param=path)
        return None
    if not isinstance(value, dict):
        raise _type_error(path, "an object", value)
    return value


def expect_dict(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _type_error(path, "an object", value)
    return value


def get_stop(obj: dict[str, Any], key: str, path: str) -> list[str]:
    """A stop-sequence field that may be one string or a list of strings."""
    value = obj.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return value
    raise _type_error(path, "a string or an array of strings", value)


def new_id(prefix: str, nbytes: int = 12) -> str:
    return prefix + random_hex(nbytes)  # kernel randomness read 4 KiB at a time (gateway/random_ids.py)


def loads_object(text: str | bytes) -> dict[str, Any] | None:
    """Parse JSON text that should hold an object; ``None`` when it does not (no exception)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def arguments_object(arguments: str) -> dict[str, Any]:
    """Tool-call arguments JSON text as an object, for dialects that send objects (Anthropic, Gemini).

    Empty text means ``{}``; text that is not an object is wrapped so nothing is lost silently.
    """
    if not arguments.strip():
        return {}
    value = loads_object(arguments)
    if value is None:
        log.warning("tool arguments are not a JSON object; sent as {'_raw': ...}")
        return {"_raw": arguments}
    return value


_warned: set[str] = set()


def warn_unknown(dialect: str, what: str) -> None:
    """Log an unknown event/field once per process (providers add events all the time)."""
    key = f"{dialect}:{what}"
    if key not in _warned:
        if len(_warned) < 10_000:
            _warned.add(key)
        log.warning("%s: unknown %s ignored", dialect, what)


# The provider whose answer is being decoded: set by the event source around each decode
# (gateway/upstream/source.py), so a decoder's warning can name the provider (a decoder knows only
# its dialect, and one dialect has many providers: xAI, Mistral, DeepSeek … all speak Chat).
UPSTREAM: ContextVar[str | None] = ContextVar("gateway_upstream", default=None)

_upstream_warned: set[tuple[str, str, str]] = set()


def warn_upstream(dialect: str, key: str, message: str) -> None:
    """Log that an upstream's answer contradicts itself (usage parts that do not add up to its
    total, a final text that is not what its deltas said), naming the provider. ``key`` names the
    kind of contradiction: the first of each kind per provider is a warning, later ones are debug
    lines, so a provider that always does it does not flood the log."""
    provider = UPSTREAM.get() or "?"
    seen = (provider, dialect, key)
    level = logging.DEBUG if seen in _upstream_warned else logging.WARNING
    if level == logging.WARNING and len(_upstream_warned) < 10_000:
        _upstream_warned.add(seen)
    log.log(level, "upstream %s (%s): %s", provider, dialect, message)


def openai_user(user: str) -> str:
    """OpenAI caps ``user`` at 64 characters (400 ``string_above_max_length``); Claude Code's
    ``metadata.user_id`` is a ~150-character JSON string. Longer values are sent as their sha256
    hex digest: still a stable per-user id, exactly 64 characters."""
    if len(user) <= 64:
        return user
    import hashlib

    return hashlib.sha256(user.encode()).hexdigest()
