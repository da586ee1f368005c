"""The access log written off the request's path (gateway/telemetry/access_writer.py): every line,
in order, one JSON object each, on a served gateway's stdout; the last ones written at shutdown."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from gateway.telemetry.access_writer import AccessWriter
from tests.conftest import gateway_config
from tests.governance.test_keys_replicas import to_toml
from tests.support.fake_upstream import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_every_line_in_order_into_a_file_and_all_of_them_by_stop(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    with path.open("w", encoding="utf-8") as stream:
        writer = AccessWriter(stream)
        for i in range(5000):
            writer.put(orjson.dumps({"n": i, "text": "x" * (i % 50)}))
        writer.stop()
        lines = path.read_bytes().split(b"\n")  # all there before the file is closed
    assert lines[-1] == b""
    assert [orjson.loads(line)["n"] for line in lines[:-1]] == list(range(5000))


def test_a_text_stream_without_a_buffer_gets_the_lines_too() -> None:
    out = io.StringIO()
    writer = AccessWriter(out)
    writer.put(b'{"a":1}')
    writer.put(b'{"a":2}')
    writer.stop()
    assert out.getvalue() == '{"a":1}\n{"a":2}\n'


def test_a_served_gateway_writes_one_line_per_request_on_stdout(fake: Any, tmp_path: Path) -> None:
    port = free_port()
    config = gateway_config(f"http://127.0.0.1:{fake.port}", access_log=True, port=port)
    path = tmp_path / "gateway.toml"
    path.write_text(to_toml(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--config", str(path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.time() < deadline, "the gateway did not start"
            time.sleep(0.1)
        body = {"model": "anthropic--text", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        ids = [f"req-text-{i}" for i in range(3)]
        for rid in ids:
            got = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions", json=body, headers={"x-request-id": rid}, timeout=10
            )
            assert got.status_code == 200, got.text
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    lines = [orjson.loads(line) for line in out.splitlines() if line.startswith(b"{")]
    served = [line for line in lines if line.get("request_id", "").startswith("req-text-")]
    assert [line["request_id"] for line in served] == ids
    assert all(line["status"] == 200 and line["dialect"] == "openai-chat" for line in served)
