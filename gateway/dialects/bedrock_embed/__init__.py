"""Bedrock's embedding models through InvokeModel: Amazon Titan text embeddings and Cohere embed.

Their own package, not the Converse or the Anthropic one: Bedrock's embedding models are neither
Claude nor Converse (Converse does not embed); each speaks its vendor's InvokeModel body, so each
is one small module (``titan.py``, ``cohere.py``). Which one a Bedrock provider speaks is the
upstream model's family, read from its id (``amazon.titan-embed-text-v2:0``,
``cohere.embed-english-v3``, ``us.cohere.embed-v4:0``, an ARN ending in one). The host, SigV4 /
API-key auth and Bedrock's error bodies are the platform's (gateway/platforms/bedrock.py).

Neither body carries the input token count for Cohere; Bedrock's ``X-Amzn-Bedrock-Input-Token-Count``
response header does, for both.
"""

from __future__ import annotations

TOKEN_COUNT_HEADER = "x-amzn-bedrock-input-token-count"


def header_tokens(headers: object) -> int | None:
    value = getattr(headers, "get", lambda _: None)(TOKEN_COUNT_HEADER)
    return int(value) if isinstance(value, str) and value.isdigit() else None
