"""AWS Bedrock: Claude through InvokeModel (``dialect = "anthropic"``) and the Converse API
(``dialect = "bedrock-converse"``) on ``bedrock-runtime.{region}.amazonaws.com``.

What Bedrock changes about the Anthropic call (``adapt``):

* the model is in the path, one percent-encoded segment — ids with ``:``
  (``anthropic.claude-sonnet-4-5-20250929-v1:0``) and inference-profile ARNs with ``/`` stay one
  segment; cross-region profile ids (``us.``, ``eu.``, ``apac.``, ``global.``) are ids like any other;
* ``POST /model/{id}/invoke-with-response-stream`` for a stream, ``/model/{id}/invoke`` for a whole
  reply; no ``model`` and no ``stream`` in the body, ``anthropic_version: "bedrock-2023-05-31"``;
* betas travel in the body's ``anthropic_beta`` list, not a header, and only those Bedrock takes
  (``BETAS``); the others are dropped and reported like any dropped setting
  (``anthropic_beta:<name>``); no ``anthropic-version`` header, no ``x-api-key``.

The streamed reply is AWS eventstream framing (gateway/eventstream.py); each ``chunk`` event's
payload is ``{"bytes": base64(one Anthropic event)}``, unwrapped into the frame the Anthropic
decoder already reads. Converse events pass as they are (``event`` = ``:event-type``).

Credentials: SigV4 with botocore's chain (gateway/platforms/aws_auth.py), or a Bedrock API key
(``api_key_env`` / ``api_key``: ``Authorization: Bearer``, no signature).
"""

from __future__ import annotations

import importlib.util
import re
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
import orjson

from gateway.dialects.base import UpstreamCall
from gateway.errors import GatewayError, kind_for_status
from gateway.eventstream import EventStreamDecoder, as_frame, unwrap_invoke
from gateway.platforms.aws_auth import SigV4
from gateway.platforms.base import ConfigError, Framer, Platform

if TYPE_CHECKING:
    from gateway.settings import ProviderSettings

ANTHROPIC_VERSION = "bedrock-2023-05-31"

# anthropic-beta values Bedrock's InvokeModel accepts for Claude (AWS "Anthropic Claude Messages
# API" request parameters, cross-checked with LiteLLM's maintained per-provider beta table,
# anthropic_beta_headers_config.json); anything else is refused by Bedrock with a 400 ("invalid
# beta flag"), so it is dropped and reported. Keep this list in step with AWS's page.
BETAS = frozenset({
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
})

# x-amzn-ErrorType (before its ":http://internal…" suffix) -> (kind, status)
ERRORS: dict[str, tuple[str, int]] = {
    "ThrottlingException": ("rate_limit", 429),
    "ServiceQuotaExceededException": ("rate_limit", 429),
    "ValidationException": ("invalid_request", 400),
    "AccessDeniedException": ("permission", 403),
    "UnrecognizedClientException": ("permission", 403),
    "InvalidSignatureException": ("permission", 403),
    "ExpiredTokenException": ("permission", 403),
    "ResourceNotFoundException": ("not_found", 404),
    "ModelErrorException": ("bad_gateway", 502),  # HTTP 424: the model failed on the request
    "ModelTimeoutException": ("timeout", 504),  # HTTP 408
    "ModelNotReadyException": ("overloaded", 503),  # HTTP 429 while the model is loaded
    "InternalServerException": ("api_error", 500),
    "ServiceUnavailableException": ("overloaded", 503),
}

_REGION_IN_HOST = re.compile(r"bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com")


def region_of(s: ProviderSettings) -> str | None:
    """The signing region: ``region``, else the one in an AWS ``endpoint_url`` host."""
    if s.region:
        return s.region
    found = _REGION_IN_HOST.search(s.endpoint_url or "")
    return found.group(1) if found else None


def uses_api_key(s: ProviderSettings) -> bool:
    return s.api_key is not None or bool(s.api_key_env)


def model_path(model: str, stream: bool) -> str:
    action = "invoke-with-response-stream" if stream else "invoke"
    return f"/model/{quote(model, safe='')}/{action}"


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
    kept: list[str] = []
    dropped: list[str] = []
    for value in (header or "").split(","):
        value = RENAMED_BETAS.get(value.strip(), value.strip())
        if value in BETAS:
            if value not in kept:
                kept.append(value)
        elif value:
            dropped.append(value)
    return kept, dropped


class Bedrock(Platform):
    name = "bedrock"
    extra = "bedrock"
    packages = ("botocore",)

    def check(self, s: ProviderSettings) -> None:
        if importlib.util.find_spec("botocore") is None:
            raise ConfigError(f"provider {s.name!r}: platform 'bedrock' needs botocore: pip install 'llm-gateway[bedrock]'")
        if not s.region and not s.endpoint_url:
            raise ConfigError(f"provider {s.name!r}: platform 'bedrock' needs region (or endpoint_url)")
        if not uses_api_key(s) and region_of(s) is None:
            raise ConfigError(f"provider {s.name!r}: platform 'bedrock' needs region to sign requests (SigV4) with endpoint_url {s.endpoint_url!r}")
        if s.dialect not in ("anthropic", "bedrock-converse"):
            raise ConfigError(f"provider {s.name!r}: platform 'bedrock' speaks dialect 'anthropic' (Claude) or 'bedrock-converse', not {s.dialect!r}")

    def base_url(self, s: ProviderSettings) -> str:
        if s.endpoint_url:
            return s.endpoint_url
        return f"https://bedrock-runtime.{s.region}.amazonaws.com" if s.region else ""

    def adapt(self, call: UpstreamCall, upstream_model: str, s: ProviderSettings) -> UpstreamCall:
        if s.dialect != "anthropic":
            return call  # Converse: its codec builds /model/{id}/converse(-stream) itself
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
            model_path(upstream_model, stream), body, params=call.params, headers=headers, method=call.method,
            dropped=[*call.dropped, *(b if b in UNSUPPORTED_FIELDS else f"anthropic_beta:{b}" for b in dropped)],
        )

    def headers(self, s: ProviderSettings) -> dict[str, str]:
        key = s.key()
        return {"authorization": f"Bearer {key}"} if key else {}

    def auth(self, s: ProviderSettings) -> httpx.Auth | None:
        if uses_api_key(s):
            return None
        region = region_of(s)
        assert region is not None, "check() requires a region for SigV4"
        return SigV4(region, s.name)

    def framer(self, s: ProviderSettings) -> Framer:
        return EventStreamDecoder(unwrap_invoke if s.dialect == "anthropic" else as_frame)

    def decode_error(self, status: int, headers: httpx.Headers, body: bytes) -> GatewayError | None:
        etype = headers.get("x-amzn-errortype", "").split(":", 1)[0]
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            obj = None
        if not etype and isinstance(obj, dict) and isinstance(obj.get("__type"), str):
            etype = obj["__type"].rsplit("#", 1)[-1]
        message = obj.get("message") or obj.get("Message") if isinstance(obj, dict) else None
        if not etype and not isinstance(message, str):
            return None  # not Bedrock's shape: the codec decodes it
        kind, code = ERRORS.get(etype, (kind_for_status(status), status))
        text = message if isinstance(message, str) and message else body[:2000].decode("utf-8", "replace") or f"HTTP {status}"
        return GatewayError(kind, f"Bedrock {etype or status}: {text}", code, raw=etype or None, origin="bedrock")

    def credential_source(self, s: ProviderSettings) -> str:
        if s.api_key is not None:
            return "Bedrock API key in the config"
        if s.api_key_env:
            return f"Bedrock API key from ${s.api_key_env}" + ("" if s.key() else " (NOT SET)")
        region = region_of(s)
        if region is None or importlib.util.find_spec("botocore") is None:
            return "AWS SigV4 (not usable: see the error above)"
        method = SigV4(region, s.name).method()
        return f"AWS SigV4 in {region}, credentials: {method}" if method else f"AWS SigV4 in {region}: NO AWS credentials found"


PLATFORM = Bedrock()
