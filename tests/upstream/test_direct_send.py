"""``Provider.send`` past httpx's client layers (``direct_transport``): only where they do nothing.

A plain provider on the gateway's transport sends straight to it and gets the answer as before;
an auth that signs each request (the cloud platforms'), httpx's own transport or an event hook
keeps httpx's full ``AsyncClient.send``, which runs them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from gateway.dialects.base import UpstreamCall
from gateway.settings import ProviderSettings
from gateway.upstream.providers import Provider


def _provider(url: str, **settings: Any) -> Provider:
    return Provider(
        ProviderSettings(name="up", dialect="anthropic", base_url=url, api_key=SecretStr("sk-x"), **settings)
    )


async def _post(provider: Provider) -> tuple[int, bytes]:
    call = UpstreamCall(method="POST", path="/v1/messages", body={"model": "text", "max_tokens": 5, "messages": []})
    response = await provider.send(call)
    try:
        return response.status_code, await response.aread()
    finally:
        await provider.close_response(response)


class _Stamp(httpx.Auth):
    def auth_flow(self, request: httpx.Request) -> Any:
        request.headers["x-signed"] = "yes"
        yield request


@pytest.mark.parametrize("how", ["direct", "auth", "httpx-transport", "hook"])
async def test_the_same_answer_whichever_path_and_auth_still_signs(fake: Any, how: str) -> None:
    url = f"http://127.0.0.1:{fake.port}"
    provider = _provider(url, transport="httpx") if how == "httpx-transport" else _provider(url)
    if how == "auth":
        provider.auth = _Stamp()
    provider.start()
    hooked: list[str] = []
    if how == "hook":
        assert provider.client is not None

        async def hook(request: httpx.Request) -> None:
            hooked.append(request.url.path)

        provider.client.event_hooks["request"].append(hook)
    assert (provider._direct is not None) == (how in ("direct", "hook"))
    before = len(fake.received)
    try:
        status, body = await _post(provider)
    finally:
        await provider.close()
    assert status == 200 and b"content" in body, body[:300]
    assert len(fake.received) == before + 1
    if how == "auth":
        assert fake.received[-1].headers.get("x-signed") == "yes"
    assert hooked == (["/v1/messages"] if how == "hook" else [])
