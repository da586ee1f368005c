"""The embeddings IR's vectors: float arrays kept as the upstream's bytes, base64 both ways, exactly."""

from __future__ import annotations

import orjson

from gateway.dialects.embeddings import RawFloats, as_encoding, cut_float_arrays, to_base64, to_floats


def test_float_arrays_are_cut_out_and_passed_on_byte_for_byte() -> None:
    body = (
        b'{"data": [{"object": "embedding", "embedding" : [0.5, -1.25e-3, 3]}, {"object":"embedding","embedding":[1,2]}],'
        b' "model": "\\"embedding\\": [9]"}'
    )
    rest, arrays = cut_float_arrays(body, b"embedding")
    assert [a.raw for a in arrays] == [b"[0.5, -1.25e-3, 3]", b"[1,2]"]
    parsed = orjson.loads(rest)
    assert [d["embedding"] for d in parsed["data"]] == [0, 0]
    assert parsed["model"] == '"embedding": [9]'  # the key inside a string is not a key
    assert orjson.dumps(as_encoding(arrays, "float")) == b"[[0.5, -1.25e-3, 3],[1,2]]"


def test_what_is_not_a_number_array_is_left_to_the_parser() -> None:
    for body in (
        b'{"embedding": "AACAPw=="}',
        b'{"embedding": ["a", 1]}',
        b'{"embedding": []}',
        b'{"embedding": {"float": [1]}}',
    ):
        rest, arrays = cut_float_arrays(body, b"embedding")
        assert rest == body and arrays == []


def test_base64_round_trips_exactly() -> None:
    values = [0.5, -0.25, 1.0, 3.140625]
    encoded = to_base64(values)
    assert to_floats(encoded) == values
    assert to_base64(RawFloats(b"[0.5, -0.25, 1.0, 3.140625]")) == encoded
    assert to_floats(RawFloats(b"[0.5,-0.25]")) == [0.5, -0.25]
    assert as_encoding([encoded], "base64")[0] is encoded  # passed through, not re-encoded


def test_azure_routes_by_api_version() -> None:
    from gateway.dialects.embeddings import EmbedPart, EmbedRequest
    from gateway.dialects.openai_chat.embeddings import AZURE
    from gateway.settings import ProviderSettings

    req = EmbedRequest("m", ["a"], dimensions=8)
    for version, path, params in (
        ("2024-10-21", "/openai/deployments/emb%2Fx/embeddings", {"api-version": "2024-10-21"}),
        ("v1", "/openai/v1/embeddings", {}),
        ("preview", "/openai/v1/embeddings", {"api-version": "preview"}),
    ):
        s = ProviderSettings(
            name="az",
            dialect="openai-chat",
            platform="azure",
            base_url="https://r.openai.azure.com",
            api_version=version,
            deployments={"text-embedding-3-large": "emb/x"},
        )
        call = AZURE.build(req, EmbedPart(["a"]), "text-embedding-3-large", s)
        assert (call.path, call.params) == (path, params)
        assert call.body == {"model": "emb/x", "input": ["a"], "dimensions": 8, "encoding_format": "float"}
