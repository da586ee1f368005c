"""Thinking signatures as a Gemini caller can hold them.

``thoughtSignature`` is a protobuf ``bytes`` field: google-genai validates it as base64 into
``bytes`` and sends it back re-encoded with the URL-safe alphabet. The shared packed form
``gw~<origin>~<raw>`` is not base64, so the SDK rejects the whole response
(``Data should be valid base64``). For Gemini callers a foreign signature is therefore packed and
then base64-encoded; parsing accepts that (either alphabet, padding optional), the plain shared
form, and raw Gemini signatures (which are passed on untouched).
"""

from __future__ import annotations

import base64
import binascii

from gateway.dialects.signatures import PREFIX, for_caller, unpack

DIALECT = "gemini"
_PREFIX_BYTES = PREFIX.encode()


def to_caller(origin: str, raw: str) -> str:
    """What a Gemini caller is handed for a signature made by ``origin``."""
    if origin == DIALECT:
        return raw
    return base64.b64encode(for_caller(DIALECT, origin, raw).encode()).decode("ascii")


def from_caller(value: str) -> tuple[str, str]:
    """``(origin, raw)`` of a ``thoughtSignature`` a Gemini caller sent back."""
    if value.startswith(PREFIX):
        return unpack(value, DIALECT)
    text = value.replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return DIALECT, value
    if decoded.startswith(_PREFIX_BYTES):
        try:
            return unpack(decoded.decode(), DIALECT)
        except UnicodeDecodeError:
            pass
    return DIALECT, value
