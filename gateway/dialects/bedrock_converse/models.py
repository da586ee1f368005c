"""Which model family a Converse model id belongs to, for the fields Converse leaves to the model.

Converse is one request shape for every model on Bedrock, except what goes in
``additionalModelRequestFields``: reasoning and ``top_k`` are each family's own. The id may be a
base model (``anthropic.claude-sonnet-4-5-20250929-v1:0``), a cross-region inference profile
(``us.`` / ``eu.`` / ``apac.`` / ``global.`` prefixes) or an ARN of either; an application
inference profile's ARN does not name its model, and reads as ``other``.
"""

from __future__ import annotations

from typing import Literal

Family = Literal["claude", "nova2", "nova", "gpt-oss", "other"]


def family(model: str) -> Family:
    name = model.rpartition("/")[2].lower()  # an ARN ends with the model or profile id
    if "anthropic." in name or name.startswith("claude"):
        return "claude"
    if "amazon.nova-2" in name:
        return "nova2"
    if "amazon.nova" in name:
        return "nova"
    if "openai.gpt-oss" in name:
        return "gpt-oss"
    return "other"
