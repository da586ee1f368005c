"""Stateless round trip of thinking signatures across dialects.

A signature (Anthropic thinking ``signature``, Gemini ``thoughtSignature``, Responses reasoning
``encrypted_content``, Interactions thought ``signature``) is only valid at the provider that made
it. When a caller of another dialect receives one, the encoder packs it with its origin; the
caller's SDK keeps that opaque string and sends it back on the next turn; the parser unpacks it;
a builder sends it upstream only to a provider of the same origin. Nothing is stored server-side.

Packed form: ``gw~<origin dialect>~<raw signature>``. ``~`` never occurs in base64 / base64url,
which every provider's signature uses.

Gemini callers are the exception: google-genai types ``thoughtSignature`` as base64 bytes and
rejects anything else, so the gemini codec hands them base64 of the packed string and accepts
either base64 alphabet back (``dialects/gemini/sigs.py``).
"""

from __future__ import annotations

PREFIX = "gw~"


def pack(origin: str, raw: str) -> str:
    return f"{PREFIX}{origin}~{raw}"


def unpack(value: str, default_origin: str) -> tuple[str, str]:
    """Return ``(origin, raw)``; an unpacked value belongs to ``default_origin`` (the caller's dialect)."""
    if value.startswith(PREFIX):
        origin, sep, raw = value[len(PREFIX) :].partition("~")
        if sep:
            return origin, raw
    return default_origin, value


def for_caller(caller_dialect: str, origin: str, raw: str) -> str:
    """What a caller of ``caller_dialect`` should be handed for a signature made by ``origin``."""
    return raw if origin == caller_dialect else pack(origin, raw)
