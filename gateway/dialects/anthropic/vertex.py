"""Claude on Google Vertex AI: ``…/publishers/anthropic/models/{m}:streamRawPredict``.

``:rawPredict`` for a whole answer; the Messages body without ``model`` (it is in the path) and
with ``anthropic_version: "vertex-2023-10-16"`` in place of the ``anthropic-version`` header;
``stream`` stays in the body (Vertex reads it, as Anthropic's own Vertex client sends it);
``anthropic-beta`` stays a header, holding only the betas Vertex takes (``BETAS``, first-party
names renamed by ``RENAMED_BETAS``); the others are dropped and reported (``anthropic_beta:<name>``),
since Vertex answers 400 for a beta it does not know (Claude Code's
``prompt-caching-scope-2026-01-05``). Vertex's own extra stream events (``vertex_event``) are
dropped by the platform's framer (gateway/platforms/vertex.py), so they reach no caller. Below the platform's
``/v1/projects/{project}/locations/{location}`` (gateway/platforms/vertex.py ``prefix``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from gateway.dialects.anthropic import betas
from gateway.dialects.base import OnPlatform, UpstreamCall
from gateway.dialects.cloud import vertex_prefix

if TYPE_CHECKING:
    from gateway.dialects.cloud import CloudSettings

ANTHROPIC_VERSION = "vertex-2023-10-16"

# anthropic-beta values Claude on Vertex AI accepts (Google's "Claude on Vertex AI" feature pages,
# cross-checked with LiteLLM's maintained per-provider table anthropic_beta_headers_config.json,
# "vertex_ai"); anything else Vertex refuses with a 400, so it is dropped and reported. Not on
# Vertex (unlike the first-party API): prompt-caching-scope, effort, files-api, code-execution,
# mcp-client, skills, structured-outputs, fine-grained-tool-streaming, token-efficient-tools,
# output-128k, web-fetch. Keep this list in step with Google's pages.
BETAS = frozenset(
    {
        "compact-2026-01-12",
        "compact-2026-09-04",
        "computer-use-2024-10-22",
        "computer-use-2025-01-24",
        "computer-use-2025-11-24",
        "context-1m-2025-08-07",
        "context-management-2025-06-27",
        "dangerous-tool-use-2026-09-03",
        "interleaved-thinking-2025-05-14",
        "per-turn-control-2026-07-01",
        "thinking-binding-controls-2026-08-01",
        "thinking-display-updates-2026-08-18",
        "tool-search-tool-2025-10-19",
        "web-search-2025-03-05",
    }
)

# The same feature under Vertex's own beta name (as on Bedrock).
RENAMED_BETAS = {"advanced-tool-use-2025-11-20": "tool-search-tool-2025-10-19"}


def _filter_betas(call: UpstreamCall) -> None:
    """Keep in ``call``'s anthropic-beta header only what Vertex takes; report the rest dropped."""
    name = next((k for k in call.headers if k.lower() == "anthropic-beta"), None)
    if name is None:
        return
    kept, dropped = betas.split(call.headers.pop(name), BETAS, RENAMED_BETAS)
    if kept:
        call.headers["anthropic-beta"] = ",".join(kept)
    call.dropped.extend(f"anthropic_beta:{b}" for b in dropped)


class OnVertex(OnPlatform):
    def adapt(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall:

        body = dict(call.body)
        body.pop("model", None)
        body["anthropic_version"] = ANTHROPIC_VERSION
        method = "streamRawPredict" if body.get("stream") else "rawPredict"
        call.path = f"{vertex_prefix(s)}/publishers/anthropic/models/{quote(upstream_model, safe='@')}:{method}"
        call.body = body
        _filter_betas(call)
        return call

    def count_call(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall | None:
        """``…/publishers/anthropic/models/count-tokens:rawPredict``, the model in the body (as
        Anthropic's Vertex client sends it)."""

        call.path = f"{vertex_prefix(s)}/publishers/anthropic/models/count-tokens:rawPredict"
        call.body = {**call.body, "model": upstream_model, "anthropic_version": ANTHROPIC_VERSION}
        _filter_betas(call)
        return call


ADAPTER = OnVertex()
