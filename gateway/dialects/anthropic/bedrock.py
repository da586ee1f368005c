"""Claude on AWS Bedrock through InvokeModel: what Bedrock changes about the Messages call.

* the model goes in the path (``/model/{id}/invoke-with-response-stream``, ``/invoke`` for a whole
  reply: ``gateway.dialects.cloud.bedrock_model_path``); no ``model`` and no ``stream`` in the body,
  ``anthropic_version: "bedrock-2023-05-31"``;
* betas travel in the body's ``anthropic_beta`` list, not a header, and only those Bedrock takes
  (``BETAS``, first-party names renamed by ``RENAMED_BETAS``); the others are dropped and reported
  like any dropped setting (``anthropic_beta:<name>``); no ``anthropic-version`` header;
* top-level fields absent from Bedrock's body schema are dropped and reported; fields Bedrock takes
  only behind a beta get that beta.

The stream is Bedrock's eventstream framing (the platform's); each ``chunk`` carries one Anthropic
event base64-encoded (``unwrap``: gateway/framing/eventstream.py ``unwrap_invoke``). No counting route.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.dialects.anthropic import betas
from gateway.dialects.base import OnPlatform, Unwrap, UpstreamCall
from gateway.dialects.cloud import bedrock_model_path

if TYPE_CHECKING:
    from gateway.dialects.cloud import CloudSettings

ANTHROPIC_VERSION = "bedrock-2023-05-31"

# anthropic-beta values Bedrock's InvokeModel accepts for Claude (AWS "Anthropic Claude Messages
# API" request parameters, cross-checked with LiteLLM's maintained per-provider beta table,
# anthropic_beta_headers_config.json); anything else is refused by Bedrock with a 400 ("invalid
# beta flag"), so it is dropped and reported. Keep this list in step with AWS's page.
BETAS = frozenset(
    {
        "compact-2026-01-12",
        "dangerous-tool-use-2026-09-03",
        "thinking-binding-controls-2026-08-01",
        "thinking-display-updates-2026-08-18",
        "mid-conversation-output-config-2026-07-01",
        "mid-conversation-tool-changes-2026-07-01",
        "computer-use-2024-10-22",
        "computer-use-2025-01-24",
        "computer-use-2025-11-24",
        "token-efficient-tools-2025-02-19",
        "interleaved-thinking-2025-05-14",
        "output-128k-2025-02-19",
        "dev-full-thinking-2025-05-14",
        "context-1m-2025-08-07",
        "context-management-2025-06-27",
        "effort-2025-11-24",
        "tool-search-tool-2025-10-19",
        "tool-examples-2025-10-29",
        "fine-grained-tool-streaming-2025-05-14",
    }
)

# Top-level Messages fields absent from Bedrock's InvokeModel body schema (Bedrock answers "Extra
# inputs are not permitted"): dropped and reported. ``metadata`` carries only ``user_id``, advisory.
UNSUPPORTED_FIELDS = ("metadata", "service_tier", "container", "inference_geo")
# Fields Bedrock takes only with their beta named in ``anthropic_beta``: the beta is added.
BETA_GATED = {"context_management": "context-management-2025-06-27", "output_config": "effort-2025-11-24"}

# The same feature under Bedrock's own beta name (Claude Code sends the first-party name to a
# gateway that looks like api.anthropic.com).
RENAMED_BETAS = {"advanced-tool-use-2025-11-20": "tool-search-tool-2025-10-19"}


def split_betas(header: str | None) -> tuple[list[str], list[str]]:
    """(kept, dropped) of an ``anthropic-beta`` header's values, kept ones in Bedrock's names."""
    return betas.split(header, BETAS, RENAMED_BETAS)


class OnBedrock(OnPlatform):
    def adapt(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall:

        body = dict(call.body)
        stream = bool(body.pop("stream", False))
        body.pop("model", None)
        body["anthropic_version"] = ANTHROPIC_VERSION
        headers = {k: v for k, v in call.headers.items() if k.lower() not in ("anthropic-beta", "anthropic-version")}
        beta = next((v for k, v in call.headers.items() if k.lower() == "anthropic-beta"), None)
        kept, dropped = split_betas(beta)
        for name in UNSUPPORTED_FIELDS:
            if body.pop(name, None) is not None:
                dropped.append(name)
        for name, gate in BETA_GATED.items():
            if name in body and gate not in kept:
                kept.append(gate)
        if kept:
            body["anthropic_beta"] = kept
        return UpstreamCall(
            bedrock_model_path(upstream_model, stream),
            body,
            params=call.params,
            headers=headers,
            method=call.method,
            dropped=[*call.dropped, *(b if b in UNSUPPORTED_FIELDS else f"anthropic_beta:{b}" for b in dropped)],
        )

    def unwrap(self) -> Unwrap | None:
        from gateway.framing.eventstream import unwrap_invoke

        return unwrap_invoke


ADAPTER = OnBedrock()
