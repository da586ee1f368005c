"""The console in a real headless Chromium (Debian's ``chromium``, driven by Playwright with the
system binary; nothing is downloaded). Skipped when /usr/bin/chromium or the driver is missing.

A user types the admin key; every page loads without a console error; a request made by an SDK
appears in Requests with its tokens; its row opens the Inspector, which shows the upstream's raw
frames beside the caller's; the Overview updates without a reload; no response the page fetched
contains a secret; the pages fit a phone's width without horizontal scrolling. The Playground
streams an answer in each caller dialect from that dialect's own events (thinking, tool-call
arguments filling in), ends with the stream's usage and the cost the gateway booked, shows hostile
model output as text, shows a broken stream as broken, and a refused caller key's own error.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.fake_upstream import CAPTURES, FakeUpstream, ServerThread

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ADMIN = "adm-browser-secret-7f3a"
CALLER = "sk-caller-browser-9c1d"
SECRETS = (ADMIN, CALLER, "sk-upstream-")
RATES = {
    "input": 1.0,
    "output": 10.0,
    "cache_read": 0.1,
    "cache_write": 2.0,
    "reasoning": 20.0,
}  # $/Mtok: every answer has a real cost
HOSTILE = "<img src=x onerror=alert(1)> <script>alert(2)</script>"

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright driver is not installed")
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"
)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """A second loopback upstream whose Anthropic answer is markup: it must reach the page as text."""
    root = tmp_path_factory.mktemp("hostile-captures")
    (root / "anthropic").mkdir()
    text = (CAPTURES / "anthropic" / "text.sse").read_text()
    (root / "anthropic" / "markup.sse").write_text(text.replace("Hello from", HOSTILE))
    with ServerThread(FakeUpstream(captures=root)) as server:
        yield server


@pytest.fixture(scope="module")
def console(fake: FakeUpstream, hostile: ServerThread) -> Iterator[ServerThread]:
    conf = gateway_config(f"http://127.0.0.1:{fake.port}")
    conf["auth"] = {"keys_env": "", "keys": [CALLER]}
    conf["admin"] = {"key": ADMIN}
    conf["inspector"] = {"capture": "all"}
    conf["prices"] = {"*": RATES}
    conf["providers"].append(
        {
            **conf["providers"][0],
            "name": "up-hostile",
            "dialect": "anthropic",
            "base_url": hostile.url,
            "api_key": "sk-upstream-hostile",
        }
    )
    conf["routes"].insert(0, {"model": "markup", "provider": "up-hostile", "upstream_model": "x--markup"})
    with ServerThread(create_app(Settings(**conf))) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class Watched:
    """A page with every console message, page error and fetched body kept for the assertions."""

    def __init__(self, browser: Any, width: int = 1280, height: int = 800) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.bodies: list[tuple[str, bytes]] = []
        self.page.on(
            "console",
            lambda m: (
                self.problems.append(f"console {m.type}: {m.text} at {m.location.get('url')}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on(
            "requestfailed",
            lambda r: (
                self.problems.append(f"request failed: {r.url} {r.failure}")
                if "/admin/console/live" not in r.url
                else None
            ),
        )
        self.page.on("response", self._keep)

    def _keep(self, response: Any) -> None:
        if "/admin/console/live" in response.url:
            return  # a stream that never ends; its frames are the overview's JSON, checked via the API
        try:
            self.bodies.append((response.url, response.body()))
        except Exception:
            pass

    def sign_in(self, base: str) -> None:
        self.page.goto(base + "/ui")
        self.page.fill("#admin-key", ADMIN)
        self.page.press("#admin-key", "Enter")
        self.wait_ready("overview")

    def wait_ready(self, page: str) -> None:
        self.page.wait_for_selector(f'#view[data-ready="{page}"]', timeout=10000)

    def check_clean(self) -> None:
        assert self.problems == []
        for url, body in self.bodies:
            for secret in SECRETS:
                assert secret.encode() not in body, f"{url} carried a secret"
        stored = self.page.evaluate("() => Object.keys(localStorage).length")
        assert stored == 0  # the admin key lives in sessionStorage only

    def no_horizontal_scroll(self) -> None:
        assert self.page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


def _sdk_request(server: ServerThread, model: str) -> str:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=CALLER)
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
        max_tokens=16,
    )
    for _ in stream:
        pass
    return stream.response.headers["x-request-id"]


def test_a_request_made_by_an_sdk_is_in_requests_and_opens_in_the_inspector(
    console: ServerThread, browser: Any
) -> None:
    rid = _sdk_request(console, "anthropic--text")
    w = Watched(browser)
    w.sign_in(console.url)
    w.page.click('nav a[data-page="requests"]')
    w.wait_ready("requests")
    row = w.page.locator(f'tr[data-request-id="{rid}"]')
    assert row.count() == 1
    cells = row.inner_text()
    assert "anthropic--text" in cells and "up-anthropic" in cells and "200" in cells
    record = httpx.get(console.url + "/admin/console/requests", headers={"authorization": f"Bearer {ADMIN}"}).json()[
        "requests"
    ]
    tokens = next(r for r in record if r["request_id"] == rid)
    assert (
        tokens["input_tokens"] and f"{tokens['input_tokens']} / {tokens['output_tokens']}" in cells
    )  # its tokens, as the upstream reported them
    row.click()
    w.wait_ready("inspector")
    upstream = w.page.locator("ol.frames.upstream").inner_text()
    caller = w.page.locator("ol.frames.caller").inner_text()
    assert "event: message_start" in upstream and "+" in upstream and "ms" in upstream
    assert "chat.completion.chunk" in caller and "[DONE]" in caller
    assert "TextDelta" in w.page.locator("ol.frames.events").inner_text()
    w.check_clean()
    w.context.close()


def test_errors_stand_out_and_the_filter_narrows(console: ServerThread, browser: Any) -> None:
    client = openai.OpenAI(base_url=console.url + "/v1", api_key=CALLER, max_retries=0)
    with pytest.raises(openai.APIStatusError):
        client.chat.completions.create(
            model="openai-chat--error_429", messages=[{"role": "user", "content": "hi"}], max_tokens=16
        )
    w = Watched(browser)
    w.sign_in(console.url)
    w.page.goto(console.url + "/ui#/requests?status=error")
    w.wait_ready("requests")
    rows = w.page.locator("table.requests tbody tr")
    assert rows.count() >= 1
    assert all("row-error" in (rows.nth(i).get_attribute("class") or "") for i in range(rows.count()))
    w.check_clean()
    w.context.close()


def test_the_overview_updates_without_a_reload(console: ServerThread, browser: Any) -> None:
    w = Watched(browser)
    w.sign_in(console.url)
    before = int(w.page.locator('[data-stat="requests"]').inner_text().replace(",", ""))
    _sdk_request(console, "gemini--text")
    w.page.wait_for_function(
        f"() => Number(document.querySelector('[data-stat=\"requests\"]').textContent.replace(/,/g, '')) > {before}",
        timeout=10000,
    )
    assert w.page.locator("figure.chart svg").count() == 4
    w.check_clean()
    w.context.close()


@pytest.mark.parametrize("page", ["overview", "requests", "inspector", "keys", "playground"])
def test_every_page_fits_a_phone_and_loads_clean(console: ServerThread, browser: Any, page: str) -> None:
    _sdk_request(console, "openai-chat--text")
    w = Watched(browser, 390, 844)
    w.sign_in(console.url)
    w.page.goto(console.url + f"/ui#/{page}")
    w.wait_ready(page)
    w.no_horizontal_scroll()
    w.page.keyboard.press("Tab")  # keyboard reachable: focus lands on a control, not nowhere
    assert w.page.evaluate("() => document.activeElement && document.activeElement !== document.body")
    w.check_clean()
    w.context.close()


def test_a_wrong_admin_key_is_asked_again(console: ServerThread, browser: Any) -> None:
    w = Watched(browser)
    w.page.goto(console.url + "/ui")
    w.page.fill("#admin-key", "not-the-key")
    w.page.press("#admin-key", "Enter")
    w.page.wait_for_selector("#login-error:has-text('refused')", timeout=10000)
    assert w.page.locator("#login").is_visible()
    w.context.close()


def test_a_key_created_in_the_page_works_and_a_revoked_one_gets_401(console: ServerThread, browser: Any) -> None:
    info = httpx.get(console.url + "/admin/console/info", headers={"authorization": f"Bearer {ADMIN}"}).json()
    if not info["named_keys"]:
        pytest.skip("this gateway has no named keys (the admin API's /admin/keys)")
    w = Watched(browser)
    w.sign_in(console.url)
    w.page.click('nav a[data-page="keys"]')
    w.wait_ready("keys")
    w.page.fill('input[name="name"]', "browser-made")
    w.page.fill('input[name="rpm"]', "100")
    w.page.fill('input[name="mcp_tools"]', "calc_*, files_read_*")
    w.page.click("text=Create key")
    secret = w.page.locator("#new-key code").inner_text(timeout=10000)
    client = openai.OpenAI(base_url=console.url + "/v1", api_key=secret, max_retries=0)
    assert client.chat.completions.create(
        model="openai-chat--text", messages=[{"role": "user", "content": "hi"}], max_tokens=16
    ).choices
    row = w.page.locator('tr[data-key="browser-made"]')
    assert row.locator("td.mcp-tools").inner_text() == "calc_*, files_read_*"  # the MCP tools it may call
    row.locator('input[name="rpm"]').fill("7")
    row.locator('input[name="mcp_tools"]').fill("files_*")
    row.locator("text=Save").click()
    deadline = time.time() + 10
    while (
        got := httpx.get(console.url + "/admin/keys/browser-made", headers={"authorization": f"Bearer {ADMIN}"}).json()
    )["rpm"] != 7 or got["mcp_tools"] != ["files_*"]:
        assert time.time() < deadline, "the limits changed in the page are not the key's limits"
        time.sleep(0.1)
    w.page.locator('tr[data-key="browser-made"] button.danger').click()
    w.page.wait_for_selector('tr[data-key="browser-made"]:has-text("revoked")', timeout=10000)
    deadline = time.time() + 5
    while True:  # revocations hold within a second (the key records are re-read)
        try:
            client.chat.completions.create(
                model="openai-chat--text", messages=[{"role": "user", "content": "hi"}], max_tokens=16
            )
        except openai.AuthenticationError:
            break
        assert time.time() < deadline, "the revoked key still works"
        time.sleep(0.2)
    carrying = [u for u, b in w.bodies if secret.encode() in b]
    assert len(carrying) == 1 and carrying[0].endswith("/admin/keys")  # the creation's answer only: shown once
    w.check_clean()
    w.context.close()


def test_the_keys_page_shows_each_keys_spend_as_admin_spend_says(console: ServerThread, browser: Any) -> None:
    auth = {"authorization": f"Bearer {ADMIN}"}
    made = {
        "spender-free": httpx.post(console.url + "/admin/keys", headers=auth, json={"name": "spender-free"}),
        "spender-daily": httpx.post(
            console.url + "/admin/keys",
            headers=auth,
            json={"name": "spender-daily", "budget_usd": 50, "budget_period": "day"},
        ),
    }
    for answer in made.values():
        assert answer.status_code == 201, answer.text
        client = openai.OpenAI(base_url=console.url + "/v1", api_key=answer.json()["key"], max_retries=0)
        for _ in range(3):  # priced answers (RATES): a real cost each
            client.chat.completions.create(model="openai-chat--text", messages=[{"role": "user", "content": "hi"}])
    w = Watched(browser)
    w.sign_in(console.url)
    w.page.click('nav a[data-page="keys"]')
    w.wait_ready("keys")
    for name, period in (("spender-free", "all time"), ("spender-daily", "day ")):
        expected = httpx.get(console.url + f"/admin/spend?key={name}", headers=auth).json()["total"]["cost_usd"]
        assert expected > 0
        row = w.page.locator(f'tr[data-key="{name}"]')
        shown = row.locator("span.spend")
        shown.wait_for(timeout=10000)
        assert float(shown.get_attribute("data-spent-usd") or "0") == pytest.approx(expected, abs=1e-9)
        assert f"${expected:.6f}" in shown.inner_text() or f"${expected:.4f}" in shown.inner_text()
        assert period in row.locator("span.period").inner_text()
    w.check_clean()
    w.context.close()


# -- the Playground ------------------------------------------------------------------------------
TOOLS = '[{"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]'
# Every change of a tool call's argument text, as the page made it (the arguments filling in).
WATCH_ARGS = """() => { window.argsSeen = []; new MutationObserver((ms) => { for (const m of ms) {
  const pre = m.target.parentElement; if (pre && pre.classList.contains("pg-args")) window.argsSeen.push(m.target.data); } })
  .observe(document.getElementById("view"), { subtree: true, characterData: true }); }"""


def _play(
    w: Watched, base: str, model: str, dialect: str, key: str | None = CALLER, tools: str = "", thinking: bool = False
) -> Any:
    """Send one prompt from the Playground; the answer element once its cost lookup is over."""
    w.page.goto(base + "/ui#/playground")
    w.wait_ready("playground")
    w.page.fill("#pg-model", model)
    w.page.select_option("#pg-dialect", dialect)
    if key is not None:
        w.page.fill("#pg-key", key)
    if tools:
        w.page.click("details summary")
        w.page.fill("#pg-tools", tools)
    if thinking:
        w.page.check('input[name="thinking"]')
    w.page.evaluate(WATCH_ARGS)
    w.page.click("#pg-send")
    w.page.wait_for_selector("#pg-answer[data-booked]", timeout=15000)
    return w.page.locator("#pg-answer")


def _booked(server: ServerThread, rid: str) -> dict[str, Any]:
    records = httpx.get(
        server.url + "/admin/console/requests", params={"request_id": rid}, headers={"authorization": f"Bearer {ADMIN}"}
    ).json()["requests"]
    assert len(records) == 1
    return dict(records[0])


def _blocks(w: Watched) -> list[tuple[str, str]]:
    return [
        (b.get_attribute("data-kind") or "", b.locator("pre").inner_text()) for b in w.page.locator(".pg-block").all()
    ]


@pytest.mark.parametrize(("dialect", "model"), [
    ("anthropic", "anthropic--thinking_tool_call"),
    ("openai-chat", "openai-responses--thinking_tool_call"),
    ("openai-responses", "anthropic--tool_call"),
    ("gemini", "openai-chat--thinking"),
    ("gemini-interactions", "anthropic--thinking_tool_call"),
])  # fmt: skip
def test_the_playground_draws_the_answer_from_the_dialects_own_stream(
    console: ServerThread, browser: Any, fake: FakeUpstream, dialect: str, model: str
) -> None:
    w = Watched(browser)
    w.sign_in(console.url)
    answer = _play(w, console.url, model, dialect, tools=TOOLS if "tool" in model else "", thinking="thinking" in model)
    assert answer.get_attribute("data-state") == "done", answer.inner_text()
    blocks = _blocks(w)
    kinds = [k for k, _ in blocks]
    sent = fake.received[-1].body
    if "tool" in model:
        assert "get_weather" in json.dumps(sent)  # the neutral tool reached the upstream, converted twice
        assert kinds[-1] == "tool" and w.page.locator(".pg-tool-name").inner_text() == "get_weather"
        args = json.loads(blocks[-1][1])
        assert args["city"] == "Paris"
        if dialect != "gemini":  # Gemini's functionCall arrives whole; the others stream the arguments
            seen = w.page.evaluate("() => window.argsSeen")
            assert len(seen) >= 2 and seen[0] != seen[-1] and seen[-1] == blocks[-1][1]  # it filled in, delta by delta
            assert w.page.locator(".pg-block[data-json=valid]").count() == 1
    if "thinking" in model:
        assert kinds[0] == "thinking" and blocks[0][1].strip()
    if model.endswith("--thinking"):
        assert kinds[-1] == "text" and blocks[-1][1].strip()
    rid = answer.get_attribute("data-request-id")
    record = _booked(console, rid)
    usage = w.page.locator("#pg-usage").inner_text()
    assert f"in {record['input_tokens']}" in usage and f"out {record['output_tokens']}" in usage and "stop:" in usage
    assert (
        record["cost_usd"]
        and float(w.page.locator("#pg-cost [data-cost]").get_attribute("data-cost")) == record["cost_usd"]
    )
    assert "Cost: $" in w.page.locator("#pg-cost").inner_text()
    assert record["dialect"] == dialect and record["status"] == 200
    w.no_horizontal_scroll()
    assert (
        CALLER not in w.page.content() and w.page.locator("#pg-key").input_value() == ""
    )  # the caller key is never shown back
    w.check_clean()
    w.context.close()


@pytest.mark.parametrize(("dialect", "model"), [
    ("anthropic", "openai-chat--error_mid_stream"),
    ("openai-chat", "anthropic--cut_mid_event"),
    ("gemini", "anthropic--error_mid_stream"),
    ("openai-responses", "gemini--cut_mid_event"),
])  # fmt: skip
def test_an_answer_broken_mid_stream_shows_its_part_and_the_error(
    console: ServerThread, browser: Any, dialect: str, model: str
) -> None:
    w = Watched(browser)
    w.sign_in(console.url)
    answer = _play(w, console.url, model, dialect)
    assert answer.get_attribute("data-state") == "error"  # never a cut answer that looks finished
    assert "Partial" in w.page.locator(".pg-block[data-kind=text] pre").inner_text()
    assert w.page.locator(".pg-error").count() >= 1 and w.page.locator(".pg-error").first.inner_text().strip()
    w.check_clean()
    w.context.close()


def test_hostile_model_output_is_shown_as_text(console: ServerThread, browser: Any) -> None:
    w = Watched(browser)
    dialogs: list[str] = []

    def dialog(d: Any) -> None:  # an alert() the markup would run if it were parsed as HTML
        dialogs.append(d.message)
        d.dismiss()

    w.page.on("dialog", dialog)
    w.sign_in(console.url)
    answer = _play(w, console.url, "markup", "openai-chat")
    assert answer.get_attribute("data-state") == "done"
    assert HOSTILE in w.page.locator(".pg-block[data-kind=text] pre").inner_text()
    assert w.page.locator("#pg-answer img, #pg-answer script").count() == 0
    assert dialogs == []
    w.check_clean()
    w.context.close()


def test_a_wrong_or_missing_caller_key_shows_the_gateways_error(console: ServerThread, browser: Any) -> None:
    w = Watched(browser)
    w.sign_in(console.url)
    answer = _play(w, console.url, "anthropic--text", "anthropic", key="sk-not-a-key")
    assert answer.get_attribute("data-state") == "error"
    assert "HTTP 401" in answer.inner_text() and "invalid API key" in answer.inner_text()
    assert w.page.locator("#pg-key").input_value() == ""  # the key typed is never shown back
    w.page.click("text=Forget the caller key")
    answer = _play(w, console.url, "anthropic--text", "gemini", key=None)
    assert "HTTP 401" in answer.inner_text() and "missing API key" in answer.inner_text()
    assert w.page.locator("#view").get_attribute("data-ready") == "playground"  # the admin session is untouched
    w.problems = [p for p in w.problems if "status of 401" not in p]  # the browser logs the refused fetch itself
    w.check_clean()
    w.context.close()


def test_stop_ends_the_stream_and_the_gateway_books_the_hang_up(console: ServerThread, browser: Any) -> None:
    w = Watched(browser)
    w.sign_in(console.url)
    w.page.goto(console.url + "/ui#/playground")
    w.wait_ready("playground")
    w.page.fill("#pg-model", "anthropic--slow_stream")  # 500 events, 10 ms apart
    w.page.select_option("#pg-dialect", "openai-chat")
    w.page.fill("#pg-key", CALLER)
    w.page.click("#pg-send")
    w.page.wait_for_selector(".pg-block[data-kind=text]", timeout=10000)
    w.page.click("#pg-stop")
    w.page.wait_for_selector("#pg-answer[data-booked]", timeout=15000)
    answer = w.page.locator("#pg-answer")
    assert answer.get_attribute("data-state") == "error" and "Stopped" in answer.inner_text()
    assert "HTTP 499 (client_gone)" in w.page.locator("#pg-cost").inner_text()  # the gateway saw the caller hang up
    w.problems = [p for p in w.problems if "ERR_ABORTED" not in p]  # the fetch the page aborted itself
    w.check_clean()
    w.context.close()
