"""Embeddings through the gateway, the official SDKs as callers, a loopback double of every upstream.

Each cell asserts the exact vectors in input order, their size, the usage the caller sees and
what the upstream received (its path, auth, body: dimensions and task type mapped), and the
access-log line (``"kind": "embeddings"``, the tokens, ``usage_estimated`` where the upstream
counts nothing).
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import openai
import pytest
from google.genai import types as gtypes

from tests.support.access_log import Capture
from tests.support.callers import gemini_client, openai_client
from tests.support.embed_double import EmbedDouble, b64, vector, words
from tests.support.fake_upstream import ServerThread

TEXTS = ["the first text", "a second, longer text to embed", "text"]


def rid() -> str:
    return "req_emb_" + uuid.uuid4().hex[:12]


def create(gateway: ServerThread, request_id: str, **kw: Any) -> Any:
    return openai_client(gateway.url).embeddings.create(extra_headers={"x-request-id": request_id}, **kw)


def estimate(texts: list[str]) -> int:
    return sum(max(1, len(t) // 4) for t in texts)


# ---------------------------------------------------------------- OpenAI caller


@pytest.mark.parametrize("encoding", ["float", "base64", None], ids=["float", "base64", "sdk-default"])
def test_openai_sdk_to_openai(gateway: ServerThread, double: EmbedDouble, log: Capture, encoding: str | None) -> None:
    before = len(double.calls("openai"))
    request_id = rid()
    kw: dict[str, Any] = {"encoding_format": encoding} if encoding else {}
    got = create(gateway, request_id, model="text", input=TEXTS, **kw)
    # an explicit base64 comes back as the strings; the SDK's own default is decoded by the SDK
    expected = [b64(vector(t, "text")) if encoding == "base64" else vector(t, "text") for t in TEXTS]
    assert [d.embedding for d in got.data] == expected
    assert [d.index for d in got.data] == [0, 1, 2] and got.model == "text"
    assert got.usage.prompt_tokens == got.usage.total_tokens == sum(words(t) for t in TEXTS)
    sent = double.calls("openai")[before:]
    assert len(sent) == 1 and sent[0]["body"]["input"] == TEXTS and sent[0]["body"]["model"] == "text"
    # the SDK asks for base64 by default: the upstream is asked the same, its strings passed through
    assert sent[0]["body"]["encoding_format"] == (encoding or "base64")
    line = log.line(request_id)
    assert line["kind"] == "embeddings" and line["input_tokens"] == sum(words(t) for t in TEXTS)
    assert line["usage_estimated"] is False and line["provider"] == "openai" and line["status"] == 200


def test_base64_is_passed_through_untouched(gateway: ServerThread) -> None:
    raw = httpx.post(
        gateway.url + "/v1/embeddings",
        json={"model": "text", "input": "one", "encoding_format": "base64"},
        headers={"authorization": "Bearer sk-caller"},
    )
    assert raw.status_code == 200
    assert raw.json()["data"][0]["embedding"] == b64(vector("one", "text"))


def test_single_string_and_dimensions(gateway: ServerThread, double: EmbedDouble) -> None:
    got = create(gateway, rid(), model="oai-small", input="just one", dimensions=5, encoding_format="float")
    assert [d.embedding for d in got.data] == [vector("just one", "text-embedding-3-small", 5)]
    assert double.calls("openai")[-1]["body"]["dimensions"] == 5


def test_token_arrays_reach_an_openai_upstream(gateway: ServerThread, double: EmbedDouble) -> None:
    got = create(gateway, rid(), model="text", input=[[1, 2, 3], [40, 50]], encoding_format="float")
    assert [d.embedding for d in got.data] == [vector([1, 2, 3], "text"), vector([40, 50], "text")]
    assert double.calls("openai")[-1]["body"]["input"] == [[1, 2, 3], [40, 50]]
    one = create(gateway, rid(), model="text", input=[7, 8, 9], encoding_format="float")
    assert one.data[0].embedding == vector([7, 8, 9], "text") and one.usage.prompt_tokens == 3


def test_more_than_2048_inputs_to_openai_are_split(gateway: ServerThread, double: EmbedDouble) -> None:
    texts = [f"n{i}" for i in range(2049)]
    before = len(double.calls("openai"))
    got = create(gateway, rid(), model="text", input=texts)
    assert [d.embedding for d in got.data] == [vector(t, "text") for t in texts]
    assert [d.index for d in got.data] == list(range(2049))
    assert sorted(len(c["body"]["input"]) for c in double.calls("openai")[before:]) == [1, 2048]
    assert got.usage.prompt_tokens == 2049


def test_openai_sdk_to_gemini_api_splits_at_100(gateway: ServerThread, double: EmbedDouble, log: Capture) -> None:
    texts = [f"item number {i}" for i in range(250)]
    before = len(double.calls("gemini"))
    request_id = rid()
    got = create(gateway, request_id, model="gem", input=texts, dimensions=8)  # the SDK's base64
    assert [d.embedding for d in got.data] == [vector(t, "gemini-embedding-001", 8) for t in texts]
    calls = double.calls("gemini")[before:]
    assert sorted(len(c["body"]["requests"]) for c in calls) == [50, 100, 100]
    assert all(r["outputDimensionality"] == 8 for c in calls for r in c["body"]["requests"])
    assert calls[0]["path"] == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    # the Gemini API counts nothing: the gateway's estimate, marked so
    assert got.usage.prompt_tokens == estimate(texts)
    line = log.line(request_id)
    assert line["usage_estimated"] is True and line["input_tokens"] == estimate(texts)


def test_openai_sdk_to_vertex(gateway: ServerThread, double: EmbedDouble, log: Capture) -> None:
    before = len(double.calls("vertex"))
    request_id = rid()
    got = create(gateway, request_id, model="vtx", input=TEXTS, dimensions=6, encoding_format="float")
    assert [d.embedding for d in got.data] == [vector(t, "gemini-embedding-001", 6) for t in TEXTS]
    calls = double.calls("vertex")[before:]
    assert len(calls) == 3  # gemini-embedding-001 takes one instance per call
    assert calls[0]["path"].endswith("/publishers/google/models/gemini-embedding-001:predict")
    assert calls[0]["headers"]["authorization"].startswith("Bearer ya29.double-")  # the OAuth token
    assert all(c["body"]["parameters"] == {"outputDimensionality": 6} for c in calls)
    assert got.usage.prompt_tokens == sum(words(t) for t in TEXTS) and log.line(request_id)["usage_estimated"] is False
    many = [f"doc {i}" for i in range(300)]
    got = create(gateway, rid(), model="vtx5", input=many, encoding_format="float")
    assert [d.embedding for d in got.data] == [vector(t, "text-embedding-005") for t in many]
    assert sorted(len(c["body"]["instances"]) for c in double.calls("vertex")[-2:]) == [50, 250]


def test_openai_sdk_to_bedrock_titan_one_call_per_input(gateway: ServerThread, double: EmbedDouble) -> None:
    before = len(double.calls("bedrock"))
    texts = [f"titan text {i}" for i in range(20)]
    got = create(gateway, rid(), model="titan", input=texts, dimensions=256, encoding_format="float")
    assert [d.embedding for d in got.data] == [vector(t, "amazon.titan-embed-text-v2:0", 256) for t in texts]
    calls = double.calls("bedrock")[before:]
    assert len(calls) == 20 and sorted(c["body"]["inputText"] for c in calls) == sorted(texts)
    assert all(c["body"]["dimensions"] == 256 and c["body"]["normalize"] is True for c in calls)
    assert got.usage.prompt_tokens == sum(words(t) for t in texts)


def test_openai_sdk_to_bedrock_cohere_splits_at_96(gateway: ServerThread, double: EmbedDouble) -> None:
    before = len(double.calls("bedrock"))
    texts = [f"cohere {i}" for i in range(100)]
    got = create(gateway, rid(), model="cohere", input=texts)
    assert [d.embedding for d in got.data] == [vector(t, "cohere.embed-english-v3") for t in texts]
    calls = double.calls("bedrock")[before:]
    assert sorted(len(c["body"]["texts"]) for c in calls) == [4, 96]
    assert all(c["body"]["input_type"] == "search_document" for c in calls)  # the default without a task type
    assert got.usage.prompt_tokens == 200  # Bedrock's X-Amzn-Bedrock-Input-Token-Count, summed


def test_a_route_s_task_type_for_callers_that_send_none(gateway: ServerThread, double: EmbedDouble) -> None:
    create(gateway, rid(), model="cohere-query", input=["what is it?"])  # OpenAI has no task type
    assert double.calls("bedrock")[-1]["body"]["input_type"] == "search_query"
    client = gemini_client(gateway.url)
    client.models.embed_content(
        model="cohere-query", contents="a doc", config=gtypes.EmbedContentConfig(task_type="CLUSTERING")
    )
    assert double.calls("bedrock")[-1]["body"]["input_type"] == "clustering"  # the caller's wins


def test_openai_sdk_to_azure(gateway: ServerThread, double: EmbedDouble) -> None:
    got = create(gateway, rid(), model="az", input=TEXTS, dimensions=4)
    assert [d.embedding for d in got.data] == [vector(t, "text-embedding-3-small", 4) for t in TEXTS]
    call = double.calls("azure")[-1]
    assert call["path"] == "/openai/deployments/emb-small/embeddings" and call["query"]["api-version"] == "2024-10-21"
    assert call["body"]["model"] == "emb-small" and call["body"]["dimensions"] == 4


# ---------------------------------------------------------------- Gemini caller


def test_genai_embed_content_single_and_batch_to_openai(gateway: ServerThread, double: EmbedDouble) -> None:
    client = gemini_client(gateway.url)
    one = client.models.embed_content(model="oai-small", contents="hello there")
    assert one.embeddings is not None and [e.values for e in one.embeddings] == [
        vector("hello there", "text-embedding-3-small")
    ]
    got = client.models.embed_content(
        model="oai-small",
        contents=TEXTS,
        config=gtypes.EmbedContentConfig(output_dimensionality=3, task_type="RETRIEVAL_QUERY"),
    )
    assert got.embeddings is not None
    assert [e.values for e in got.embeddings] == [vector(t, "text-embedding-3-small", 3) for t in TEXTS]
    body = double.calls("openai")[-1]["body"]
    assert body["input"] == TEXTS and body["dimensions"] == 3 and body["encoding_format"] == "float"


def test_genai_to_bedrock_cohere_maps_the_task_type(gateway: ServerThread, double: EmbedDouble) -> None:
    client = gemini_client(gateway.url)  # held: a client collected mid-call closes its connection
    got = client.models.embed_content(
        model="cohere4",
        contents=["q one", "q two"],
        config=gtypes.EmbedContentConfig(task_type="RETRIEVAL_QUERY", output_dimensionality=256),
    )
    assert got.embeddings is not None
    assert [e.values for e in got.embeddings] == [vector(t, "us.cohere.embed-v4:0", 256) for t in ["q one", "q two"]]
    body = double.calls("bedrock")[-1]["body"]
    assert body["input_type"] == "search_query" and body["output_dimension"] == 256


def test_genai_to_gemini_api_keeps_task_type_and_title(gateway: ServerThread, double: EmbedDouble) -> None:
    client = gemini_client(gateway.url)  # held: a client collected mid-call closes its connection
    got = client.models.embed_content(
        model="gem",
        contents=["a document"],
        config=gtypes.EmbedContentConfig(task_type="RETRIEVAL_DOCUMENT", title="The title"),
    )
    assert got.embeddings is not None and got.embeddings[0].values == vector("a document", "gemini-embedding-001")
    sent = double.calls("gemini")[-1]["body"]["requests"][0]
    assert sent["taskType"] == "RETRIEVAL_DOCUMENT" and sent["title"] == "The title"


def test_gemini_embed_content_endpoint_raw(gateway: ServerThread) -> None:
    for version in ("v1beta", "v1"):
        raw = httpx.post(
            f"{gateway.url}/{version}/models/vtx:embedContent",
            json={"content": {"parts": [{"text": "single"}]}, "taskType": "SEMANTIC_SIMILARITY"},
            headers={"x-goog-api-key": "caller-key"},
        )
        assert raw.status_code == 200, raw.text
        assert raw.json() == {"embedding": {"values": vector("single", "gemini-embedding-001")}}


def test_genai_to_azure(gateway: ServerThread) -> None:
    client = gemini_client(gateway.url)  # held: a client collected mid-call closes its connection
    got = client.models.embed_content(model="az", contents=["x y", "z"])
    assert got.embeddings is not None
    assert [e.values for e in got.embeddings] == [vector(t, "text-embedding-3-small") for t in ["x y", "z"]]


# ---------------------------------------------------------------- refusals: in dialect, nothing upstream

BAD_OPENAI = [
    ({"model": "text", "input": ""}, "input"),
    ({"model": "text", "input": []}, "input"),
    ({"model": "text", "input": ["a", ""]}, "input"),
    ({"model": "text", "input": ["a", 3]}, "input"),
    ({"model": "text", "input": [[1, 2], "a"]}, "input"),
    ({"model": "text", "input": [[]]}, "input"),
    ({"model": "text"}, "input"),
    ({"model": "text", "input": "a", "dimensions": 0}, "dimensions"),
    ({"model": "text", "input": "a", "dimensions": -3}, "dimensions"),
    ({"model": "text", "input": "a", "encoding_format": "int8"}, "encoding_format"),
    ({"model": "oai-small", "input": "a", "dimensions": 5000}, "dimensions"),  # above the model's 1,536
    ({"model": "ada", "input": "a", "dimensions": 10}, "dimensions"),  # ada-002 has a fixed size
    ({"model": "gem", "input": [[1, 2, 3]]}, "input"),  # token arrays to a text-only upstream
    ({"model": "titan", "input": [5, 6]}, "input"),
    ({"model": "claude", "input": "a"}, "model"),  # Anthropic's API has no embeddings
    ({"model": "te\nxt", "input": "a"}, "model"),  # a control character
    ({"model": 3, "input": "a"}, "model"),
]


@pytest.mark.parametrize(("body", "param"), BAD_OPENAI)
def test_bad_openai_input_is_400_naming_the_field(
    gateway: ServerThread, double: EmbedDouble, body: dict[str, Any], param: str
) -> None:
    before = len(double.seen)
    raw = httpx.post(gateway.url + "/v1/embeddings", json=body, headers={"authorization": "Bearer sk-caller"})
    assert raw.status_code == 400, raw.text
    error = raw.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error
    assert len(double.seen) == before, "a refused request reached the upstream"


def test_the_sdk_sees_a_bad_request_error(gateway: ServerThread) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        create(gateway, rid(), model="gem", input=[[1, 2]])
    assert "input" in str(caught.value) and "token arrays" in str(caught.value)


BAD_GEMINI = [
    ("embedContent", {"content": {"parts": [{"text": ""}]}}),
    ("embedContent", {"content": {"parts": []}}),
    ("embedContent", {"content": {"parts": [{"text": "a"}]}, "outputDimensionality": 0}),
    ("embedContent", {"content": {"parts": [{"text": "a"}]}, "taskType": "POETRY"}),
    ("embedContent", {"content": {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AA=="}}]}}),
    ("batchEmbedContents", {"requests": []}),
    ("batchEmbedContents", {"requests": [{"content": {"parts": [{"text": 3}]}}]}),
    (
        "batchEmbedContents",
        {
            "requests": [
                {"content": {"parts": [{"text": "a"}]}, "taskType": "RETRIEVAL_QUERY"},
                {"content": {"parts": [{"text": "b"}]}, "taskType": "CLUSTERING"},
            ]
        },
    ),
]


@pytest.mark.parametrize(("action", "body"), BAD_GEMINI)
def test_bad_gemini_input_is_400_in_googles_shape(
    gateway: ServerThread, double: EmbedDouble, action: str, body: dict[str, Any]
) -> None:
    before = len(double.seen)
    raw = httpx.post(f"{gateway.url}/v1beta/models/gem:{action}", json=body, headers={"x-goog-api-key": "caller-key"})
    assert raw.status_code == 400, raw.text
    assert raw.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert len(double.seen) == before


# ---------------------------------------------------------------- upstream failures


def test_a_429_is_retried(gateway: ServerThread, log: Capture) -> None:
    request_id = rid()
    got = create(gateway, request_id, model="oai-throttle", input=["retry me"], encoding_format="float")
    assert got.data[0].embedding == vector("retry me", "m-throttle_once")
    assert [a["status"] for a in log.line(request_id)["attempts"]] == [429, 200]


def test_a_500_surfaces_after_the_retries_in_dialect(gateway: ServerThread, log: Capture) -> None:
    request_id = rid()
    with pytest.raises(openai.InternalServerError):
        create(gateway, request_id, model="oai-500", input="x")
    line = log.line(request_id)
    assert [a["status"] for a in line["attempts"]] == [500, 500, 500] and line["status"] == 500
    raw = httpx.post(
        f"{gateway.url}/v1beta/models/oai-500:batchEmbedContents",
        json={"requests": [{"content": {"parts": [{"text": "x"}]}}]},
        headers={"x-goog-api-key": "caller-key"},
    )
    assert raw.status_code == 500 and raw.json()["error"]["status"] == "INTERNAL"


def test_one_failing_part_fails_the_whole_request(gateway: ServerThread, double: EmbedDouble, log: Capture) -> None:
    texts = [f"t {i}" for i in range(150)] + ["boom"]  # the second call of two fails, every time
    request_id = rid()
    before = len(double.calls("gemini"))
    with pytest.raises(openai.InternalServerError):
        create(gateway, request_id, model="gem", input=texts)
    line = log.line(request_id)
    assert line["status"] == 500 and [a["status"] for a in line["attempts"]] == [500, 500, 500]
    # the retries sent only the failing part again: 1 + 3 calls, not 2 × 3
    assert [len(c["body"]["requests"]) for c in double.calls("gemini")[before:]].count(51) == 3
    assert len(double.calls("gemini")[before:]) == 4
    # the answered part's tokens were spent upstream: on the record (estimated: the Gemini API counts none)
    assert line["input_tokens"] == estimate(texts[:100]) and line["usage_estimated"] is True
    assert line["provider"] == "gemini-api" and line["attempts"][-1]["usage"]["input_tokens"] == estimate(texts[:100])


def test_a_fallback_embeds_the_whole_request_with_its_own_model(gateway: ServerThread, log: Capture) -> None:
    request_id = rid()
    got = create(gateway, request_id, model="falls", input=TEXTS, encoding_format="float")
    assert [d.embedding for d in got.data] == [vector(t, "fb-gem") for t in TEXTS]
    line = log.line(request_id)
    assert line["provider"] == "gemini-api" and line["upstream_model"] == "fb-gem"
    got = create(gateway, rid(), model="pool", input=["pooled"], encoding_format="float")
    assert got.data[0].embedding == vector("pooled", "pool-gem")


def test_an_unreachable_upstream_is_a_502_in_dialect(gateway: ServerThread) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        create(gateway, rid(), model="down", input="x")
    assert caught.value.status_code == 502 and "unreachable" in str(caught.value)


def test_the_upstream_refusing_the_gateway_s_key_is_a_502_never_a_401(gateway: ServerThread) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        create(gateway, rid(), model="badkey", input="x")
    assert caught.value.status_code == 502 and "rejected the gateway's credentials" in str(caught.value)


def test_an_answer_with_too_few_vectors_is_a_502_not_a_partial_answer(gateway: ServerThread) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        create(gateway, rid(), model="short", input=TEXTS)
    assert caught.value.status_code == 502 and "2 embeddings for 3 inputs" in str(caught.value)


def test_a_caller_that_hangs_up_is_logged_499(gateway: ServerThread, log: Capture) -> None:
    request_id = rid()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            gateway.url + "/v1/embeddings",
            json={"model": "slow", "input": "wait"},
            headers={"authorization": "Bearer sk-caller", "x-request-id": request_id},
            timeout=0.3,
        )
    line = log.line(request_id)
    assert line["status"] == 499 and line["error_kind"] == "client_gone"


def test_an_unknown_model_is_a_404_in_dialect(gateway: ServerThread, double: EmbedDouble) -> None:
    before = len(double.seen)
    with pytest.raises(openai.NotFoundError):
        create(gateway, rid(), model="no-such-model", input="x")
    raw = httpx.post(
        f"{gateway.url}/v1beta/models/no-such-model:embedContent",
        json={"content": {"parts": [{"text": "x"}]}},
        headers={"x-goog-api-key": "caller-key"},
    )
    assert raw.status_code == 404 and raw.json()["error"]["status"] == "NOT_FOUND"
    assert len(double.seen) == before


def test_the_demo_provider_embeds_too(gateway: ServerThread) -> None:
    first = create(gateway, rid(), model="demo", input=["same text", "other"])  # the SDK's base64
    again = create(gateway, rid(), model="demo", input=["same text"], encoding_format="float")
    assert len(first.data[0].embedding) == 16 and first.data[0].embedding == again.data[0].embedding
    assert first.data[0].embedding != first.data[1].embedding
    client = gemini_client(gateway.url)
    got = client.models.embed_content(model="demo", contents=["same text"], config={"output_dimensionality": 40})
    assert got.embeddings is not None and len(got.embeddings[0].values or []) == 40


def test_a_pool_whose_targets_all_cool_answers_with_retry_after(gateway: ServerThread, double: EmbedDouble) -> None:
    with pytest.raises(openai.InternalServerError):
        create(gateway, rid(), model="pool-down", input="x")  # both fail, both cool
    before = len(double.seen)
    raw = httpx.post(
        gateway.url + "/v1/embeddings",
        json={"model": "pool-down", "input": "x"},
        headers={"authorization": "Bearer sk-caller"},
    )
    assert raw.status_code in (429, 503) and int(raw.headers["retry-after"]) > 1
    assert "cooling down" in raw.json()["error"]["message"]
    assert len(double.seen) == before
