"""IR messages → Converse ``system`` and ``messages`` (content blocks are one-key unions).

Converse blocks: ``{text}``, ``{image: {format, source: {bytes}|{s3Location}}}``,
``{document: {format, name, source}}``, ``{audio}`` / ``{video}``, ``{toolUse: {toolUseId, name,
input}}``, ``{toolResult: {toolUseId, content: [{text}|{image}|{document}], status}}``,
``{reasoningContent: {reasoningText: {text, signature}} | {redactedContent}}``, ``{cachePoint}``.
On the JSON wire ``bytes`` is base64 (botocore's blob), which is what the IR holds already.

What Bedrock insists on, and how the folding satisfies it:

* one top-level ``system``: ``req.system`` plus every ``role: "system"`` turn, in order;
* user/assistant alternation: consecutive same-role turns are merged, a user turn's tool results
  come first (Claude behind Converse refuses them later), blank text blocks are dropped (Bedrock
  400s "text field is blank");
* reasoning leads its assistant turn (Claude with thinking requires it; a Chat caller's history
  puts it after the text) and is sent back only when Converse made it (``origin == "bedrock-converse"``) and it is
  signed or redacted: another provider's thought cannot be verified;
* an Anthropic ``cache_control`` becomes a ``cachePoint`` after its block, for the model families
  that cache (``cache_points``), since others refuse the block;
* tool call ids outside Converse's pattern (``[a-zA-Z0-9_.:-]``, 64 at most) become a stable
  digest (``tool_id``), the same for the call and its result;
* media by http(s)/``gs://`` URL cannot be carried (refused in fields.py, or left out when the
  provider drops ``messages.file_url``); a media type Converse has no format for is left out and
  recorded in ``dropped``.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

from gateway.dialects.common import arguments_object
from gateway.ir import ChatRequest, FilePart, ImagePart, Part, TextPart, ThinkingPart, ToolCallPart, ToolResultPart

from .fields import image_by_url

DIALECT = "bedrock-converse"
log = logging.getLogger("gateway.dialects.bedrock_converse")

IMAGE_FORMATS = {"png": "png", "jpeg": "jpeg", "jpg": "jpeg", "gif": "gif", "webp": "webp"}
DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
AUDIO_FORMATS = {
    "mpeg": "mp3",
    "mp3": "mp3",
    "wav": "wav",
    "x-wav": "wav",
    "wave": "wav",
    "ogg": "ogg",
    "opus": "opus",
    "flac": "flac",
    "aac": "aac",
    "x-aac": "x-aac",
    "mp4": "mp4",
    "m4a": "m4a",
    "x-m4a": "m4a",
    "webm": "webm",
    "pcm": "pcm",
}
VIDEO_FORMATS = {
    "mp4": "mp4",
    "webm": "webm",
    "quicktime": "mov",
    "x-matroska": "mkv",
    "x-flv": "flv",
    "mpeg": "mpeg",
    "x-ms-wmv": "wmv",
    "3gpp": "three_gp",
}
_TOOL_ID = re.compile(r"[a-zA-Z0-9_.:-]{1,64}")
_NAME_BAD = re.compile(r"[^A-Za-z0-9\s\-()\[\]]")
_SPACES = re.compile(r"\s+")


def tool_id(call_id: str) -> str:
    """A tool call id as Converse takes it (``[a-zA-Z0-9_.:-]``, at most 64): unchanged when it
    fits, else a stable digest, so a call and its result still pair up."""
    if _TOOL_ID.fullmatch(call_id):
        return call_id
    return "gw_" + hashlib.sha256(call_id.encode()).hexdigest()[:40]


class Folder:
    """Folds one request's messages; collects what had to be left out in ``dropped``."""

    def __init__(self, cache_points: bool, dropped: list[str]) -> None:
        self.cache_points = cache_points
        self.dropped = dropped
        self._names: set[str] = set()

    # -- blocks -------------------------------------------------------------------------------
    def _drop(self, what: str, why: str) -> None:
        log.warning("bedrock-converse: %s left out: %s", what, why)
        if what not in self.dropped:
            self.dropped.append(what)

    def text(self, part: TextPart) -> list[dict[str, Any]]:
        if not part.text or not part.text.strip():
            return []
        blocks: list[dict[str, Any]] = [{"text": part.text}]
        if self.cache_points and part.cache_control is not None:
            point: dict[str, Any] = {"type": "default"}
            ttl = part.cache_control.get("ttl")
            if ttl in ("5m", "1h"):
                point["ttl"] = ttl
            blocks.append({"cachePoint": point})
        return blocks

    def _source(
        self, data: str | None, url: str | None, media_type: str | None
    ) -> tuple[dict[str, Any], str | None] | None:
        """(source, media type) of inline or s3 media; ``None`` for a URL Converse cannot fetch."""
        if data is not None:
            return {"bytes": data}, media_type
        url = url or ""
        if url.startswith("data:"):
            head, sep, payload = url.partition(",")
            if sep and head.endswith(";base64"):
                return {"bytes": payload}, head[5:-7] or media_type
            return None
        if url.startswith("s3://"):
            return {"s3Location": {"uri": url}}, media_type
        return None

    def image(self, part: ImagePart) -> dict[str, Any] | None:
        if image_by_url(part):
            return None  # refused in fields.py unless the provider drops messages.file_url
        found = self._source(part.data, part.url, part.media_type)
        if found is None:
            self._drop("messages.image", "not base64 data, a data: URL or an s3:// location")
            return None
        source, media_type = found
        subtype = (media_type or "image/png").partition("/")[2].lower()
        fmt = IMAGE_FORMATS.get(subtype)
        if fmt is None:
            self._drop("messages.image", f"Converse has no image format for {media_type!r}")
            return None
        return {"image": {"format": fmt, "source": source}}

    def _name(self, filename: str | None) -> str:
        """A document name Bedrock accepts (letters, digits, spaces, hyphens, parentheses,
        brackets; no repeated whitespace), unique within the request."""
        base = (filename or "").rpartition(".")[0] or filename or ""
        base = _SPACES.sub(" ", _NAME_BAD.sub("-", base)).strip()[:180] or "document"
        name, n = base, 1
        while name in self._names:
            n += 1
            name = f"{base} ({n})"
        self._names.add(name)
        return name

    def file(self, part: FilePart) -> dict[str, Any] | None:
        found = self._source(part.data, part.url, part.media_type)
        if found is None:
            return None  # by URL: refused in fields.py unless dropped
        source, media_type = found
        kind, _, subtype = (media_type or "application/pdf").lower().partition("/")
        if kind == "audio" and subtype in AUDIO_FORMATS:
            return {"audio": {"format": AUDIO_FORMATS[subtype], "source": source}}
        if kind == "video" and subtype in VIDEO_FORMATS:
            return {"video": {"format": VIDEO_FORMATS[subtype], "source": source}}
        fmt = DOCUMENT_FORMATS.get(f"{kind}/{subtype}")
        if fmt is None:
            self._drop("messages.file", f"Converse has no document format for {media_type!r}")
            return None
        return {"document": {"format": fmt, "name": self._name(part.filename), "source": source}}

    def tool_result(self, part: ToolResultPart) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for item in part.content:
            if isinstance(item, TextPart):
                if item.text:
                    content.append({"text": item.text})
            elif isinstance(item, ImagePart):
                block = self.image(item)
                if block is not None:
                    content.append(block)
            elif isinstance(item, FilePart):
                block = self.file(item)
                if block is not None and "document" in block:
                    content.append(block)
                elif block is not None:
                    self._drop("messages.file", "a tool result holds no audio or video")
        result: dict[str, Any] = {"toolUseId": tool_id(part.tool_call_id), "content": content}
        if part.is_error:
            result["status"] = "error"
        return {"toolResult": result}

    @staticmethod
    def reasoning(part: ThinkingPart) -> dict[str, Any] | None:
        if part.origin != DIALECT:
            return None
        if part.redacted_data is not None:
            return {"reasoningContent": {"redactedContent": part.redacted_data}}
        if part.signature:
            return {"reasoningContent": {"reasoningText": {"text": part.text, "signature": part.signature}}}
        return None

    def blocks(self, part: Part, role: str) -> list[dict[str, Any]]:
        if isinstance(part, TextPart):
            return self.text(part)
        if isinstance(part, ToolCallPart):
            return [
                {
                    "toolUse": {
                        "toolUseId": tool_id(part.id),
                        "name": part.name,
                        "input": arguments_object(part.arguments),
                    }
                }
            ]
        if isinstance(part, ToolResultPart):
            return [self.tool_result(part)]
        if isinstance(part, ImagePart) and role == "user":
            block = self.image(part)
            return [block] if block is not None else []
        if isinstance(part, FilePart) and role == "user":
            block = self.file(part)
            return [block] if block is not None else []
        if isinstance(part, ThinkingPart) and role == "assistant":
            block = self.reasoning(part)
            return [block] if block is not None else []
        return []  # media in an assistant turn: refused in fields.py

    # -- the whole conversation -----------------------------------------------------------------
    def fold(self, req: ChatRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(system blocks, alternating messages)."""
        system: list[dict[str, Any]] = [b for p in req.system for b in self.text(p)]
        turns: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = []  # role, results, others
        for message in req.messages:
            if message.role == "system":
                system.extend(b for p in message.content if isinstance(p, TextPart) for b in self.text(p))
                continue
            results: list[dict[str, Any]] = []
            others: list[dict[str, Any]] = []
            for part in message.content:
                for block in self.blocks(part, message.role):
                    (results if "toolResult" in block else others).append(block)
            if not results and not others:
                continue
            if turns and turns[-1][0] == message.role:
                turns[-1][1].extend(results)
                turns[-1][2].extend(others)
            else:
                turns.append((message.role, results, others))
        messages = []
        for role, results, others in turns:
            if role == "assistant":  # reasoning first: it preceded the answer (Claude 400s otherwise)
                others = [b for b in others if "reasoningContent" in b] + [
                    b for b in others if "reasoningContent" not in b
                ]
            messages.append({"role": role, "content": results + others})
        return system, messages


def history_tools(messages: list[dict[str, Any]]) -> list[str]:
    """Names of the tools the conversation's ``toolUse`` blocks call, in order of appearance."""
    names: list[str] = []
    for message in messages:
        for block in message["content"]:
            use = block.get("toolUse")
            if use is not None and use["name"] not in names:
                names.append(use["name"])
    return names


def has_tool_blocks(messages: list[dict[str, Any]]) -> bool:
    return any("toolUse" in b or "toolResult" in b for m in messages for b in m["content"])
