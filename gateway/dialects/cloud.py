"""Where a provider sits on a cloud platform: what a dialect's platform adapter may read, and the
resource paths the platforms and the adapters share.

A dialect's adapter for a platform (``gateway/dialects/<d>/<platform>.py``, ``OnPlatform``) turns
the dialect's own call into the platform's; the platform (``gateway/platforms/``) keeps hosts,
credentials, framing and its own errors. Both need the few facts below. They live here, under
both, so a dialect package never imports the platform layer or the configuration: the adapter is
handed a ``CloudSettings`` (``ProviderSettings`` is one, structurally) and calls these functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol
from urllib.parse import quote


class CloudSettings(Protocol):
    """The provider settings a platform adapter reads (CONTRACT.md "Cloud platforms")."""

    @property
    def name(self) -> str: ...
    @property
    def dialect(self) -> str: ...
    @property
    def platform(self) -> str | None: ...
    @property
    def region(self) -> str | None: ...
    @property
    def project(self) -> str | None: ...
    @property
    def location(self) -> str | None: ...
    @property
    def api_version(self) -> str | None: ...
    @property
    def deployments(self) -> Mapping[str, str]: ...


def vertex_prefix(s: CloudSettings, version: str = "v1") -> str:
    """``/{version}/projects/{project}/locations/{location}``: where every Vertex resource path starts."""
    return f"/{version}/projects/{quote(s.project or '', safe='')}/locations/{quote(s.location or '', safe='')}"


def bedrock_model_path(model: str, stream: bool) -> str:
    """InvokeModel's path: the model one percent-encoded segment (ids with ``:``, ARNs with ``/``),
    the action by ``stream``."""
    action = "invoke-with-response-stream" if stream else "invoke"
    return f"/model/{quote(model, safe='')}/{action}"


AZURE_V1 = ("v1", "preview")  # api_version values of Azure's v1 API (routes under /openai/v1)


def azure_deployment(s: CloudSettings, upstream_model: str) -> str:
    """The Azure deployment serving ``upstream_model``: ``deployments``, else its own name."""
    return s.deployments.get(upstream_model, upstream_model)


def azure_on_v1(s: CloudSettings) -> bool:
    """Whether ``api_version`` is the v1 API's (routes below ``/openai/v1``, no deployment in the path)."""
    return (s.api_version or "") in AZURE_V1
