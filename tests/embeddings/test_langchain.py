"""LangChain's embeddings classes as callers: ``OpenAIEmbeddings`` and ``GoogleGenerativeAIEmbeddings``
against the gateway's endpoints, with the upstreams of tests/embeddings/conftest.py."""

from __future__ import annotations

import pytest

from tests.support.embed_double import EmbedDouble, vector
from tests.support.fake_upstream import ServerThread

langchain_openai = pytest.importorskip("langchain_openai")
langchain_google_genai = pytest.importorskip("langchain_google_genai")

DOCS = ["LangChain splits documents", "and embeds each chunk", "then searches them"]


def test_openai_embeddings_to_vertex(gateway: ServerThread, double: EmbedDouble) -> None:
    # check_embedding_ctx_length=False: strings, not tiktoken's token arrays (tiktoken downloads its tables)
    embeddings = langchain_openai.OpenAIEmbeddings(
        model="vtx5", base_url=gateway.url + "/v1", api_key="sk-caller", check_embedding_ctx_length=False, max_retries=0
    )
    assert embeddings.embed_documents(DOCS) == [vector(t, "text-embedding-005") for t in DOCS]
    assert embeddings.embed_query("a question") == vector("a question", "text-embedding-005")


def test_google_embeddings_task_types_reach_cohere(gateway: ServerThread, double: EmbedDouble) -> None:
    embeddings = langchain_google_genai.GoogleGenerativeAIEmbeddings(
        model="models/cohere4", google_api_key="caller-key", base_url=gateway.url
    )
    assert embeddings.embed_documents(DOCS) == [vector(t, "us.cohere.embed-v4:0") for t in DOCS]
    assert double.calls("bedrock")[-1]["body"]["input_type"] == "search_document"  # its RETRIEVAL_DOCUMENT
    assert embeddings.embed_query("a question") == vector("a question", "us.cohere.embed-v4:0")
    assert double.calls("bedrock")[-1]["body"]["input_type"] == "search_query"  # its RETRIEVAL_QUERY
