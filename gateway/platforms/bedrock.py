"""AWS Bedrock: ``bedrock-runtime.{region}.amazonaws.com``, for the dialects whose package has a
``bedrock.py`` adapter (Claude through InvokeModel; the Converse API).

What Bedrock changes about a dialect's call is its adapter's (``OnPlatform``: the anthropic
package's ``bedrock.py`` moves the model into the path, betas into the body …). What is Bedrock's
whatever the dialect stays here: the host, the InvokeModel path (``model_path``: the model one
percent-encoded segment — ids with ``:`` such as ``anthropic.claude-sonnet-4-5-20250929-v1:0`` and
inference-profile ARNs with ``/`` stay one segment; cross-region profile ids ``us.``, ``eu.``,
``apac.``, ``global.`` are ids like any other), the credentials, the error bodies (``{"message"}``
+ ``x-amzn-ErrorType``) and the framing: streamed replies are AWS eventstream
(gateway/framing/eventstream.py), each message made a frame by the adapter's ``unwrap`` (InvokeModel's
base64 ``chunk`` payloads unwrapped; Converse events as they are).

Credentials: SigV4 with botocore's chain (gateway/platforms/aws_auth.py), or a Bedrock API key
(``api_key_env`` / ``api_key``: ``Authorization: Bearer``, no signature), never the dialect's
``x-api-key`` / ``anthropic-version`` headers.
"""

from __future__ import annotations

import importlib.util
import re
from typing import TYPE_CHECKING

import httpx
import orjson

from gateway.errors import LASTING_STATUSES, GatewayError, kind_for_status
from gateway.framing.base import Framer
from gateway.framing.eventstream import EXCEPTIONS, EventStreamDecoder, as_frame
from gateway.platforms.aws_auth import SigV4
from gateway.platforms.base import CloudPlatform, ConfigError

if TYPE_CHECKING:
    from gateway.settings import ProviderSettings

# x-amzn-ErrorType (before its ":http://internal…" suffix), lower-cased -> (kind, status)
ERRORS: dict[str, tuple[str, int]] = {
    **EXCEPTIONS,  # the exceptions a stream carries too (gateway/framing/eventstream.py): one table of Bedrock's names
    # only an HTTP answer carries these: the request's signature or credentials were refused
    "unrecognizedclientexception": ("permission", 403),
    "invalidsignatureexception": ("permission", 403),
    "expiredtokenexception": ("permission", 403),
    "modelnotreadyexception": ("overloaded", 503),  # HTTP 429 before any byte: the model is loading, try again
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


class Bedrock(CloudPlatform):
    name = "bedrock"
    extra = "bedrock"
    packages = ("botocore",)

    def check(self, s: ProviderSettings) -> None:
        if importlib.util.find_spec("botocore") is None:
            raise ConfigError(
                f"provider {s.name!r}: platform 'bedrock' needs botocore: pip install 'llm-gateway[bedrock]'"
            )
        if not s.region and not s.endpoint_url:
            raise ConfigError(f"provider {s.name!r}: platform 'bedrock' needs region (or endpoint_url)")
        if not uses_api_key(s) and region_of(s) is None:
            raise ConfigError(
                f"provider {s.name!r}: platform 'bedrock' needs region to sign requests (SigV4) with endpoint_url {s.endpoint_url!r}"
            )
        self.check_dialect(s)

    def base_url(self, s: ProviderSettings) -> str:
        if s.endpoint_url:
            return s.endpoint_url
        return f"https://bedrock-runtime.{s.region}.amazonaws.com" if s.region else ""

    def headers(self, s: ProviderSettings) -> dict[str, str]:
        """``accept: application/json``: InvokeModel's ``Accept`` is the MIME type of the answer's
        body (Claude: JSON only; the gateway's default ``text/event-stream, …`` is refused with
        "The provided Accept Type is invalid"), as botocore and Anthropic's Bedrock client send it;
        the stream's framing is chosen by the route, not this header."""
        key = s.key()
        return {"accept": "application/json", **({"authorization": f"Bearer {key}"} if key else {})}

    def auth(self, s: ProviderSettings) -> httpx.Auth | None:
        if uses_api_key(s):
            return None
        region = region_of(s)
        assert region is not None, "check() requires a region for SigV4"
        return SigV4(region, s.name)

    def framer(self, s: ProviderSettings) -> Framer:
        return EventStreamDecoder(self.on(s).unwrap() or as_frame)

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
        kind, code = ERRORS.get(etype.lower(), (kind_for_status(status), status))
        text = (
            message
            if isinstance(message, str) and message
            else body[:2000].decode("utf-8", "replace") or f"HTTP {status}"
        )
        return GatewayError(
            kind,
            f"Bedrock {etype or status}: {text}",
            code,
            raw=etype or None,
            origin="bedrock",
            lasting=status in LASTING_STATUSES,  # AccessDenied, UnrecognizedClient: no wait heals them
        )

    def credential_source(self, s: ProviderSettings) -> str:
        if s.api_key is not None:
            return "Bedrock API key in the config"
        if s.api_key_env:
            return f"Bedrock API key from ${s.api_key_env}" + ("" if s.key() else " (NOT SET)")
        region = region_of(s)
        if region is None or importlib.util.find_spec("botocore") is None:
            return "AWS SigV4 (not usable: see the error above)"
        method = SigV4(region, s.name).method()
        return (
            f"AWS SigV4 in {region}, credentials: {method}"
            if method
            else f"AWS SigV4 in {region}: NO AWS credentials found"
        )


PLATFORM = Bedrock()
