"""Model listing and lookup, in each official SDK's own shape."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as gtypes

from tests.conftest import gateway_config
from tests.support.callers import anthropic_client, gemini_client, openai_client

# The session gateway's exact routes (glob routes are not listed), in the config's order.
EXACT = [r["model"] for r in gateway_config("http://unused")["routes"] if not any(c in r["model"] for c in "*?[")]


def test_openai_sdk_lists_and_retrieves(gateway: Any) -> None:
    client = openai_client(gateway.url)
    assert [m.id for m in client.models.list()] == EXACT
    model = client.models.retrieve("anthropic--text")  # a glob route: it routes, so it exists
    assert (model.id, model.object, model.owned_by) == ("anthropic--text", "model", "gateway")
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_anthropic_sdk_lists_and_retrieves(gateway: Any) -> None:
    client = anthropic_client(gateway.url)
    assert [m.id for m in client.models.list()] == EXACT  # every page
    model = client.models.retrieve("demo")
    assert (model.id, model.type, model.display_name) == ("demo", "model", "demo")
    with pytest.raises(anthropic.NotFoundError):
        client.models.retrieve("no-such-model")


@pytest.mark.parametrize("api_version", ["v1beta", "v1"])
def test_gemini_sdk_lists_and_gets(gateway: Any, api_version: str) -> None:
    client = (
        gemini_client(gateway.url)
        if api_version == "v1beta"
        else genai.Client(api_key="caller-key", http_options=gtypes.HttpOptions(base_url=gateway.url, api_version="v1"))
    )
    assert [m.name for m in client.models.list()] == ["models/" + m for m in EXACT]
    model = client.models.get(model="gemini--text")
    assert model.name == "models/gemini--text" and "generateContent" in (model.supported_actions or [])
    with pytest.raises(genai.errors.ClientError) as err:
        client.models.get(model="no-such-model")
    assert err.value.code == 404
