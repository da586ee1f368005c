"""The paths the gateway serves to Gemini Interactions callers (``/{version}/interactions…``)."""

from __future__ import annotations

from typing import Any

from gateway.dialects.base import CallerRoute

# the SDKs use v1beta; google-genai without an explicit api_version asks for v1
ROUTES = tuple(
    route
    for version in ("v1beta", "v1")
    for route in (
        CallerRoute(f"/{version}/interactions"),
        CallerRoute(f"/{version}/interactions/{{id}}", "stored", ("GET", "DELETE")),
        CallerRoute(f"/{version}/interactions/{{id}}/{{action}}", "stored", ("POST",)),
    )
)


def recognises(path: str, header_names: Any, query_keys: Any) -> bool:
    """Asked before Gemini's own (``/v1beta/…``): the Interactions paths have their own shape."""
    return "/interactions" in path and path.startswith(("/v1beta/", "/v1/interactions"))
