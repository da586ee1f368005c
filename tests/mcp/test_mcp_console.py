"""The console in headless Chromium (as tests/console/test_console_browser.py; skipped without it):
a tool call made with the MCP SDK is a row of the Requests page, its target the MCP server and its
model the tool; a refused one stands out as an error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import ADMIN, KEYS, mcp_client

CHROMIUM = "/usr/bin/chromium"
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright driver is not installed")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")


async def _calls(url: str) -> None:
    async with mcp_client(f"{url}/mcp", KEYS["search"]) as client:
        await client.call_tool("calc_add", {"a": 1, "b": 2})
        try:
            await client.call_tool("files_delete_file", {"path": "/"})
        except Exception:
            pass


def test_tool_calls_are_rows_of_the_requests_page(gateway: Any) -> None:
    asyncio.run(_calls(gateway.url))
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"], headless=True)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(gateway.url + "/ui")
            page.fill("#admin-key", ADMIN)
            page.press("#admin-key", "Enter")
            page.wait_for_selector('#view[data-ready="overview"]', timeout=15000)
            page.goto(gateway.url + "/ui#/requests?key=search")
            page.wait_for_selector('#view[data-ready="requests"]', timeout=15000)
            rows = page.locator("tr[data-request-id]")
            texts = [rows.nth(i).inner_text() for i in range(rows.count())]
            added = [t for t in texts if "tool calc_add" in t]
            assert added and "mcp:calc" in added[0] and "200" in added[0], texts
            refused = page.locator('tr.row-error:has-text("tool files_delete_file")')
            assert refused.count() >= 1 and "403 permission" in refused.first.inner_text()
            assert errors == []
        finally:
            browser.close()
