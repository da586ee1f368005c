"""The access log written off the request's path (gateway/telemetry/access_writer.py): every line,
in order, one JSON object each, on a served gateway's stdout; the last ones written at shutdown."""

from __future__ import annotations

import io
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import orjson

from gateway.telemetry.access_writer import AccessWriter
from tests.conftest import gateway_config
from tests.governance.test_keys_replicas import to_toml
from tests.support.fake_upstream import free_port
from tests.support.processes import start_gateway_process


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
    proc, url = start_gateway_process(path, port, stdout=subprocess.PIPE)
    try:
        body = {"model": "anthropic--text", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        ids = [f"req-text-{i}" for i in range(3)]
        for rid in ids:
            got = httpx.post(url + "/v1/chat/completions", json=body, headers={"x-request-id": rid}, timeout=10)
            assert got.status_code == 200, got.text
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    lines = [orjson.loads(line) for line in out.splitlines() if line.startswith(b"{")]
    served = [line for line in lines if line.get("request_id", "").startswith("req-text-")]
    assert [line["request_id"] for line in served] == ids
    assert all(line["status"] == 200 and line["dialect"] == "openai-chat" for line in served)
