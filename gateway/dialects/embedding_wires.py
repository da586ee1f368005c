"""Which embeddings wire an upstream speaks: by its platform, its dialect and, on Bedrock, the model's family.

The wire modules live in their dialects' packages (``openai_chat/embeddings.py``,
``gemini/embeddings.py``, ``gemini/vertex_embeddings.py``, ``bedrock_embed/``); this is the one
place that lists them, so the IR module (``embeddings.py``) imports none of them.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.bedrock_embed import cohere, titan
from gateway.dialects.embeddings import EmbedWire
from gateway.dialects.gemini import embeddings as gemini_embeddings
from gateway.dialects.gemini import vertex_embeddings
from gateway.dialects.openai_chat import embeddings as openai_embeddings


def wire_for(settings: Any, model: str) -> EmbedWire | None:
    """The embedding wire of a provider (its ``platform`` and ``dialect``) for ``model``; None when
    that upstream has no embeddings API the gateway speaks (Anthropic's API has none)."""
    platform, dialect = settings.platform, settings.dialect
    if platform == "bedrock":
        return bedrock_wire(model)
    if platform == "vertex":
        return vertex_embeddings.WIRE if dialect == "gemini" else None
    if dialect in ("openai-chat", "openai-responses"):
        return openai_embeddings.AZURE if platform == "azure" else openai_embeddings.WIRE
    if dialect == "gemini" and platform is None:
        return gemini_embeddings.WIRE
    return None


def bedrock_wire(model: str) -> EmbedWire | None:
    """Bedrock's embedding models by family, read from the id (``amazon.titan-embed-text-v2:0``,
    ``cohere.embed-english-v3``, ``us.cohere.embed-v4:0``, an ARN ending in one)."""
    if "cohere.embed" in model:
        return cohere.WIRE
    if "titan-embed" in model:
        return titan.WIRE
    return None
