"""The gateway's own token estimate, where no upstream counts: about 4 characters a token.

Over every text in the request (system, messages, tool schemas) plus a few tokens per message;
the count endpoints answer it when the routed upstream has no counting endpoint of its own
(``count_tokens.py``, marked ``x-gateway-estimate: 1``) and a named key's token-per-minute and
budget holds reserve it before the upstream is called (``limits.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from gateway.ir import ChatRequest, TextPart, ThinkingPart, ToolCallPart, ToolResultPart


def estimate_tokens(req: ChatRequest) -> int:
    chars = sum(len(p.text) for p in req.system)
    for message in req.messages:
        chars += 16
        for part in message.content:
            if isinstance(part, TextPart):
                chars += len(part.text)
            elif isinstance(part, ToolCallPart):
                chars += len(part.name) + len(part.arguments)
            elif isinstance(part, ToolResultPart):
                chars += sum(len(p.text) for p in part.content if isinstance(p, TextPart))
            elif isinstance(part, ThinkingPart):
                chars += len(part.text)
            else:
                chars += 1600  # an image or file: roughly what providers charge for a small one
    for tool in req.tools:
        chars += len(tool.name) + len(tool.description or "") + len(orjson.dumps(tool.parameters))
    return max(1, chars // 4)


def estimate_text_tokens(texts: Sequence[str]) -> int:
    """The same estimate over bare texts (embedding inputs): at least one token each."""
    return sum(max(1, len(t) // 4) for t in texts)
