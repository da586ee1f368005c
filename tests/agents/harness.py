"""Run each coding-agent CLI headless against a local server, exactly as shared/AGENTS.md says.

One function per CLI builds the command line and a clean environment (a throwaway ``HOME``, only
loopback base URLs, retries off, Claude Code's non-streaming fallback off) and runs it in a work
folder with a process-group timeout. :class:`AgentRun` carries the exit code, the raw output and
the agent's final answer parsed from its JSON output.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AGENTS_DIR = Path(os.environ.get("AGENTS_PREFIX", REPO / ".agents"))
BIN = AGENTS_DIR / "node_modules" / ".bin"
CLIS = {"claude": BIN / "claude", "codex": BIN / "codex", "gemini": BIN / "gemini"}
KEY = "sk-agent-test-key"


def node_ok() -> str | None:
    """None when node >= 20 is on PATH, else why not."""
    node = shutil.which("node")
    if node is None:
        return "node is not installed (the agent CLIs need node >= 20)"
    try:
        out = subprocess.run(
            [node, "-p", "process.versions.node"], capture_output=True, text=True, timeout=20
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"node does not run: {exc}"
    if int(out.split(".")[0] or 0) < 20:
        return f"node {out} is older than 20"
    return None


def missing_clis() -> list[str]:
    return [name for name, path in CLIS.items() if not os.access(path, os.X_OK)]


@dataclass
class AgentRun:
    cli: str
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    answer: str | None = None  # the agent's final text, from its JSON output
    timed_out: bool = False
    events: list[dict] = field(default_factory=list)  # Codex's JSON lines
    outcome: str = ""  # the CLI's own words about how the turn ended (error message, result)

    def describe(self) -> str:
        out = self.stdout if not self.outcome else self.stdout[-300:]
        return (
            f"{self.cli} exit={self.returncode} timed_out={self.timed_out} in {self.seconds:.1f}s\n"
            f"answer={self.answer!r}\noutcome: {self.outcome or '(no JSON result parsed)'}\n"
            f"--- stdout (tail) ---\n{out[-2500:]}\n--- stderr (tail) ---\n{self.stderr[-1500:]}"
        )


def home_base() -> Path:
    """Where throwaway HOMEs go: outside /tmp (Codex refuses a HOME there) and git-ignored."""
    base = Path(os.environ.get("AGENT_HOME_BASE", AGENTS_DIR / "homes"))
    base.mkdir(parents=True, exist_ok=True)
    return base


@contextmanager
def throwaway_home(cli: str) -> Iterator[Path]:
    home = make_home(cli)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def make_home(cli: str) -> Path:
    home = Path(tempfile.mkdtemp(prefix=f"{cli}-", dir=home_base()))
    (home / "tmp").mkdir()  # TMPDIR: Gemini CLI writes error reports there, not into /tmp
    return home


def base_env(home: Path) -> dict[str, str]:
    """A clean environment: nothing from the caller's shell but PATH and locale (no real keys)."""
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "CI": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "DO_NOT_TRACK": "1",
        "TMPDIR": str(home / "tmp"),
    }
    node = shutil.which("node")
    if node:
        env["PATH"] = f"{Path(node).parent}:{env['PATH']}"
    return env


def _run(cli: str, cmd: list[str], env: dict[str, str], cwd: Path, timeout: float) -> AgentRun:
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this run started, and nothing else
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    return AgentRun(cli, proc.returncode, out, err, time.monotonic() - start, timed_out=timed_out)


def _json_object(text: str) -> dict | None:
    """The JSON object a CLI printed (tolerating log lines before it)."""
    text = text.strip()
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) else None
    except json.JSONDecodeError:
        pass
    start = text.find("{")
    while start != -1:
        try:
            value = json.loads(text[start:])
            return value if isinstance(value, dict) else None
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
    return None


def run_claude(
    base_url: str,
    model: str,
    prompt: str,
    cwd: Path,
    timeout: float = 90.0,
    home: Path | None = None,
    extra_args: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> AgentRun:
    """``extra_args`` / ``extra_env``: more flags (``--mcp-config`` …) and variables than the documented ones."""
    if home is None:  # a HOME of our own, removed afterwards
        with throwaway_home("claude") as own:
            return run_claude(base_url, model, prompt, cwd, timeout, own, extra_args, extra_env)
    env = base_env(home) | {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        **(extra_env or {}),
    }
    cmd = [str(CLIS["claude"]), "-p", prompt, "--model", model, "--output-format", "json", *(extra_args or [])]
    run = _run("claude", cmd, env, cwd, timeout)
    data = _json_object(run.stdout)
    if data is not None:
        keys = ("is_error", "api_error_status", "terminal_reason", "result")
        run.outcome = ", ".join(f"{k}={data.get(k)!r}" for k in keys)
        if not data.get("is_error") and isinstance(data.get("result"), str):
            run.answer = data["result"]
    return run


def run_codex(
    base_url: str,
    model: str,
    prompt: str,
    cwd: Path,
    timeout: float = 90.0,
    home: Path | None = None,
    websockets: bool = False,
    config: list[str] | None = None,
    sandbox: str = "read-only",
) -> AgentRun:
    """``base_url`` is the server root; Codex is handed ``<root>/v1`` as its provider base_url.
    ``config``: more ``-c key=value`` settings; ``sandbox``: ``workspace-write`` lets it edit files."""
    if home is None:  # a HOME of our own, removed afterwards
        with throwaway_home("codex") as own:
            return run_codex(base_url, model, prompt, cwd, timeout, own, websockets, config, sandbox)
    env = base_env(home) | {"GW_KEY": KEY, "CODEX_HOME": str(home / ".codex")}
    (home / ".codex").mkdir(exist_ok=True)
    ws = ",supports_websockets=true" if websockets else ""  # Codex then tries a WebSocket first
    provider = f'{{name="gw",base_url="{base_url}/v1",env_key="GW_KEY",wire_api="responses",request_max_retries=0,stream_max_retries=0{ws}}}'
    cmd = [
        str(CLIS["codex"]), "exec", "--skip-git-repo-check", "--ephemeral", "--json", "--sandbox", sandbox,
        "--disable", "plugins", "--disable", "remote_plugin", "--disable", "apps",
        "-c", "analytics.enabled=false", "-c", "feedback.enabled=false", "-c", "check_for_update_on_startup=false",
        "-c", "model_provider=gw", "-c", f"model_providers.gw={provider}",
        *(["-c", "features.responses_websockets=true", "-c", "features.responses_websockets_v2=true"] if websockets else []),
        *[arg for setting in config or [] for arg in ("-c", setting)],
        "-m", model, prompt,
    ]  # fmt: skip
    run = _run("codex", cmd, env, cwd, timeout)
    texts = []
    for line in run.stdout.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(event, dict):
            continue
        run.events.append(event)
        item = event.get("item") or {}
        if event.get("type") == "item.completed" and item.get("type") == "agent_message":
            texts.append(item.get("text", ""))
        if event.get("type") in ("turn.failed", "error", "turn.completed"):
            run.outcome = (run.outcome + " | " if run.outcome else "") + json.dumps(event)[:800]
    if texts and any(e.get("type") == "turn.completed" for e in run.events):
        run.answer = texts[-1]
    return run


GEMINI_SETTINGS = {
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 1},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
}


def run_gemini(
    base_url: str, model: str, prompt: str, cwd: Path, timeout: float = 90.0, home: Path | None = None
) -> AgentRun:
    if home is None:  # a HOME of our own, removed afterwards
        with throwaway_home("gemini") as own:
            return run_gemini(base_url, model, prompt, cwd, timeout, own)
    (home / ".gemini").mkdir(exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_SETTINGS))
    env = base_env(home) | {
        "GOOGLE_GEMINI_BASE_URL": base_url,
        "GEMINI_API_KEY": KEY,
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }
    cmd = [str(CLIS["gemini"]), "-m", model, "--output-format", "json", "-p", prompt]
    run = _run("gemini", cmd, env, cwd, timeout)
    data = _json_object(run.stdout) or _json_object(run.stderr[-20000:])  # errors go to stderr
    if data is not None:
        run.outcome = f"response={str(data.get('response'))[:300]!r}, error={data.get('error')!r}"
        if isinstance(data.get("response"), str) and not data.get("error"):
            run.answer = data["response"]
    return run


RUNNERS = {"claude": run_claude, "codex": run_codex, "gemini": run_gemini}
