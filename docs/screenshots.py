"""Regenerate the console screenshots in docs/ (``make screenshots``).

Runs the gateway in front of the test suite's fake upstream (captures/ replayed on loopback), sends
a little traffic with the official SDKs (a few answers, one error), then photographs each page in
the system's headless Chromium (Debian's ``chromium``; nothing is downloaded).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402
import openai  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from gateway.server.app import create_app  # noqa: E402
from gateway.settings import Settings  # noqa: E402
from tests.conftest import gateway_config  # noqa: E402
from tests.support.fake_upstream import FakeUpstream, ServerThread  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ADMIN, CALLER = "adm-screenshots", "sk-screenshots"
RATES = {
    "input": 3.0,
    "output": 15.0,
    "cache_read": 0.3,
    "cache_write": 3.75,
    "reasoning": 15.0,
}  # $/Mtok, for a cost to show
TOOLS = '[{"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]'


def playground(page: Any, url: str) -> None:
    """The Playground after one streamed answer: thinking, a tool call, usage and cost."""
    page.fill("#pg-model", "anthropic--thinking_tool_call")
    page.select_option("#pg-dialect", "openai-responses")
    page.fill("#pg-key", CALLER)
    page.click("details summary")
    page.fill("#pg-tools", TOOLS)
    page.check('input[name="thinking"]')
    page.click("#pg-send")
    page.wait_for_selector("#pg-answer[data-booked]")
    page.click("details summary")  # folded again: the answer in view


def traffic(url: str) -> str:
    oa = openai.OpenAI(base_url=url + "/v1", api_key=CALLER, max_retries=0)
    an = anthropic.Anthropic(base_url=url, api_key=CALLER, max_retries=0)
    for model in ("openai-chat--text", "gemini--text", "openai-responses--text"):
        oa.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=16)
    an.messages.create(
        model="openai-chat--tool_call", max_tokens=64, messages=[{"role": "user", "content": "weather in Paris?"}]
    )
    try:
        oa.chat.completions.create(
            model="anthropic--error_429", messages=[{"role": "user", "content": "hi"}], max_tokens=16
        )
    except openai.APIStatusError:
        pass
    stream = oa.chat.completions.create(
        model="anthropic--tool_call", messages=[{"role": "user", "content": "weather?"}], stream=True, max_tokens=64
    )
    for _ in stream:
        pass
    return stream.response.headers["x-request-id"]


def main() -> None:
    fake = FakeUpstream()
    with ServerThread(fake) as up:
        fake.port = up.port
        conf = gateway_config(f"http://127.0.0.1:{up.port}")
        conf["auth"] = {"keys_env": "", "keys": [CALLER]}
        conf["admin"] = {"key": ADMIN}
        conf["inspector"] = {"capture": "all"}
        conf["prices"] = {"*": RATES}
        with ServerThread(create_app(Settings(**conf))) as gw, sync_playwright() as p:
            rid = traffic(gw.url)
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            shots = [
                ("overview", "overview", 1280, 800),
                ("requests", "requests", 1280, 800),
                (f"inspector/{rid}", "inspector", 1280, 800),
                ("keys", "keys", 1280, 800),
                ("requests", "requests-phone", 390, 844),
                (f"inspector/{rid}", "inspector-phone", 390, 844),
                ("playground", "playground", 1280, 800),
                ("playground", "playground-phone", 390, 844),
            ]
            for route, name, width, height in shots:
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(gw.url + "/ui")
                page.fill("#admin-key", ADMIN)
                page.press("#admin-key", "Enter")
                page.wait_for_selector('#view[data-ready="overview"]')
                page.goto(gw.url + f"/ui#/{route}")
                page.wait_for_selector(f'#view[data-ready="{route.split("/")[0]}"]')
                if route == "playground":
                    playground(page, gw.url)
                out = ROOT / "docs" / f"console-{name}.png"
                page.screenshot(path=str(out), full_page=False)
                print("wrote", out.relative_to(ROOT))
                page.close()
            browser.close()


if __name__ == "__main__":
    main()
