"""Record what each coding-agent CLI sends: run it against the scripted fake, print a summary.

    .venv/bin/python agents/record.py [--via-gateway] [--cli claude|codex|gemini] [--dialect D]
                                      [--task plain|tool|thinking] [--dump FILE]

Without ``--via-gateway`` each CLI talks to the fake directly in its own dialect (Claude Code ->
anthropic, Codex -> openai-responses, Gemini CLI -> gemini): what the CLI itself sends. With it,
the CLI talks to the gateway, which talks to the fake in ``--dialect``: what the gateway sends.
``--dump`` writes every recorded request (path, query, headers, body) as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.agents import harness  # noqa: E402
from tests.agents.fake_agent_upstream import ScriptedUpstream  # noqa: E402
from tests.agents.matrix import NATIVE, gateway_for, prompt_for, task_model, work_folder  # noqa: E402
from tests.support.fake_upstream import ServerThread  # noqa: E402


def summarise(seen) -> dict:
    body = seen.body
    return {
        "path": seen.path,
        "query": seen.query,
        "status": seen.status,
        "action": seen.action,
        "error": seen.error,
        "header_names": sorted(seen.headers),
        "body_keys": sorted(body) if isinstance(body, dict) else None,
        "model": seen.model,
        "stream": seen.stream,
        "tools": seen.tool_names,
        "tool_result": (seen.tool_result or "")[:200] or None,
        "signature_back": seen.signature_back,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--via-gateway", action="store_true")
    ap.add_argument("--cli", action="append")
    ap.add_argument("--dialect", action="append")
    ap.add_argument("--task", action="append")
    ap.add_argument("--dump")
    args = ap.parse_args()
    clis = args.cli or ["claude", "codex", "gemini"]
    tasks = args.task or ["plain", "tool", "thinking"]
    fake = ScriptedUpstream()
    dumps = []
    with ServerThread(fake) as fake_server, tempfile.TemporaryDirectory() as tmp:
        fake.port = fake_server.port
        gw_ctx = gateway_for(fake_server.url, Path(tmp)) if args.via_gateway else None
        gw = gw_ctx.__enter__() if gw_ctx else None
        try:
            for cli in clis:
                for dialect in args.dialect or ([NATIVE[cli]] if not args.via_gateway else ["anthropic", "openai-chat", "openai-responses", "gemini"]):
                    if not args.via_gateway and dialect != NATIVE[cli]:
                        continue
                    for task in tasks:
                        fake.reset()
                        work = work_folder(Path(tmp) / f"{cli}-{dialect}-{task}")
                        model = task_model(dialect, task)
                        url = gw.url if gw else fake_server.url
                        run = harness.RUNNERS[cli](url, model, prompt_for(task, work), work)
                        print(f"\n===== {cli} -> {'gateway -> ' if gw else ''}{dialect} / {task}: answer={run.answer!r} exit={run.returncode} {run.seconds:.1f}s")
                        if run.answer is None:
                            print(run.describe())
                        for seen in fake.requests():
                            s = summarise(seen)
                            print(json.dumps(s))
                            dumps.append({"cli": cli, "dialect": dialect, "task": task, "path": seen.path, "query": seen.query, "headers": seen.headers, "body": seen.body, "summary": s})
        finally:
            if gw_ctx:
                gw_ctx.__exit__(None, None, None)
    if args.dump:
        Path(args.dump).write_text(json.dumps(dumps, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
