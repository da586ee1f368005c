"""The Converse wire and the IR's fields: what an upstream of this dialect cannot carry.

No caller speaks Converse, so ``PARAMS`` (a caller's own names, for refusals) is empty: a refusal
names the field in the caller's dialect. ``LIMITS`` are the settings ``request_build`` has no
place for (see ``gateway/dialects/carry.py``):

* ``parallel_tool_calls``: Converse cannot be told to call one tool at a time;
* ``tool_choice.allowed``: ``toolChoice`` is auto, any or one named tool (a required call among
  exactly one allowed tool is that tool, and is carried);
* ``response_format.json``: ``outputConfig.textFormat`` takes a JSON schema, not a schema-less mode;
* ``messages.file_url``: media reach Converse as bytes or an ``s3://`` location, never an http(s)
  or ``gs://`` URL (images by URL included; with ``drop_unsupported = ["messages.file_url"]`` they
  are left out);
* ``messages.assistant_media``: assistant turns hold no images or documents;
* ``user`` / ``metadata`` / ``store``: no equivalent, advisory (dropped and recorded).

``top_k`` and reasoning depend on the model (``additionalModelRequestFields``): the builder sends
them where it knows the model's field, and records them in ``UpstreamCall.dropped`` otherwise.
"""

from __future__ import annotations

from gateway.dialects.carry import USES, Limit
from gateway.ir import ChatRequest, ImagePart, ToolResultPart

_URL = ("http://", "https://", "gs://")


def image_by_url(part: ImagePart) -> bool:
    return part.data is None and (part.url or "").startswith(_URL)


def _media_by_url(req: ChatRequest) -> bool:
    if USES["messages.file_url"](req):
        return True
    for message in req.messages:
        for part in message.content:
            if isinstance(part, ImagePart) and image_by_url(part):
                return True
            if isinstance(part, ToolResultPart) and any(
                isinstance(p, ImagePart) and image_by_url(p) for p in part.content
            ):
                return True
    return False


PARAMS: dict[str, str] = {}

LIMITS = (
    Limit("parallel_tool_calls", "Bedrock Converse cannot be told to make one tool call at a time"),
    Limit(
        "tool_choice.allowed",
        "Bedrock Converse's toolChoice names one tool, not a list of allowed tools",
        when=lambda r: (
            USES["tool_choice.allowed"](r)
            and not (
                r.tool_choice is not None and r.tool_choice.mode == "required" and len(r.tool_choice.allowed or ()) == 1
            )
        ),
    ),
    Limit(
        "response_format.json",
        "Bedrock Converse takes a JSON schema (outputConfig.textFormat), not a schema-less JSON mode",
    ),
    Limit(
        "messages.file_url",
        "Bedrock Converse takes images and documents as bytes or an s3:// location, not by URL",
        when=_media_by_url,
    ),
    Limit("messages.assistant_media", "Bedrock Converse assistant turns cannot hold images or documents"),
    Limit("user", "Bedrock Converse takes no end-user id", advisory=True),
    Limit("metadata", "Bedrock Converse takes no request metadata", advisory=True),
    Limit("store", "a Chat caller's store (OpenAI stored completions) has no Bedrock equivalent", advisory=True),
)

HINTS: dict[str, tuple[str, ...]] = {}  # no caller speaks Converse
