"""Where a whole or streamed request's CPU goes, by stage: py-spy over the gateway under load.

Starts the fake and one gateway (bench/overhead.py's config), drives C concurrent requests of one
caller x upstream pair for D seconds while ``py-spy record --format raw`` samples the gateway, and
sorts every sampled stack into the stage of its innermost gateway frame that names one (parse,
validation, carry, routing, keys/limits, upstream client, decode, encode, logging/telemetry,
server/ASGI, event loop). Prints the shares as a markdown row; ``--json-out`` writes them.

    pip install py-spy   # into the gateway's venv
    python bench/profile.py --caller anthropic --upstream openai-chat [--stream] [-c 16] [-d 10]
    python bench/profile.py --raw /tmp/stacks.txt ...   # keep the collapsed stacks (flamegraph.pl / speedscope)
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import loadgen  # noqa: E402
import overhead  # noqa: E402
import run as runmod  # noqa: E402

# (stage, substrings of a frame "function (path:line)"): the first stage whose pattern a frame
# holds, scanning from the innermost frame outwards, takes the sample.
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("validation", ("dialects/validation", "/validate.py")),
    ("carry", ("dialects/carry",)),
    ("keys/limits", ("governance/",)),
    ("routing", ("routing/",)),
    ("logging/telemetry", ("telemetry/", "logging/__init__")),
    ("encode", ("encode", "reply.py", "stream_writer", "fast_path", "model_rename")),
    ("decode", ("decode", "framing/", "upstream/source", "usage_fields")),
    ("upstream client", ("gateway/http/", "httpx/", "httpcore/", "upstream/providers", "relay/attempts")),
    ("parse", ("parse_request", "parse_json_object", "orjson", "/request.py", "asgi.py")),
    ("relay", ("relay/",)),
    ("server/ASGI", ("server/", "uvicorn/", "starlette/", "httptools")),
    ("event loop", ("asyncio/", "uvloop", "selectors")),
]


def stage_of(stack: str) -> str:
    frames = stack.split(";")
    for frame in reversed(frames):
        for stage, pats in STAGES:
            if any(p in frame for p in pats):
                return stage
    return "other"


def breakdown(raw: str) -> dict[str, float]:
    counts: dict[str, int] = {}
    total = 0
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        if "process_" in stack.split(";")[0] and "MainThread" not in stack.split(";")[0]:
            pass
        k = stage_of(stack)
        counts[k] = counts.get(k, 0) + int(n)
        total += int(n)
    return {k: round(100 * v / total, 1) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])} if total else {}


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (utime + stime) of each thread of ``pid``, by thread name (comm)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / runmod.CLK_TCK
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--caller", default="anthropic")
    ap.add_argument("--upstream", default="openai-chat")
    ap.add_argument("--stream", action="store_true", help="streamed requests (default: whole)")
    ap.add_argument("-c", "--concurrency", type=int, default=16)
    ap.add_argument("-d", "--duration", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=997, help="py-spy samples per second")
    ap.add_argument("--auth", action="store_true", help="a limited named key (bench/overhead.py's)")
    ap.add_argument("--tracing", action="store_true")
    ap.add_argument("--gil", action="store_true", help="sample only the thread holding the GIL (py-spy --gil)")
    ap.add_argument(
        "--cprofile",
        default=None,
        help="instead of py-spy: run the gateway under cProfile timing CPU (thread_time), stats here",
    )
    ap.add_argument("--raw", default=None, help="keep py-spy's collapsed stacks here")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(runmod.gateway_python()).parent / "py-spy")
    tmp = Path(tempfile.mkdtemp(prefix="gateway-profile-"))
    fake_port = runmod.free_port()
    fake = subprocess.Popen(
        [sys.executable, str(BENCH / "fake_upstream.py"), "--port", str(fake_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    gw = None
    try:
        runmod.wait_http(f"http://127.0.0.1:{fake_port}/healthz", fake, 10, "the fake upstream", None)
        gw = overhead.Gateway(tmp, "gw", fake_port, auth=args.auth, tracing=args.tracing, cprofile=args.cprofile)
        gw.wait(60)
        key = overhead.LIMITED_KEY if args.auth else None
        headers = None
        if key is not None:
            headers = {"x-api-key": key} if args.caller == "anthropic" else {"authorization": f"Bearer {key}"}
        model = f"bench-{args.upstream}"

        async def load(duration: float) -> loadgen.Result:
            return await loadgen.run_load(
                gw.url, args.caller, model, args.concurrency, duration=duration, chunks=50,
                stream=args.stream, extra_headers=headers,
            )  # fmt: skip

        loop = loadgen.new_loop()
        loop.run_until_complete(load(1.0))
        raw = Path(args.raw) if args.raw else tmp / "stacks.txt"
        cmd = [spy, "record", "--format", "raw", "-r", str(args.rate), "-d", str(int(args.duration))]
        prof = (
            None
            if args.cprofile
            else subprocess.Popen(
                [*cmd, "--nonblocking", *(["--gil"] if args.gil else []), "-o", str(raw), "-p", str(gw.proc.pid)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        if args.cprofile:
            gw.proc.send_signal(signal.SIGUSR1)
        threads_before = thread_cpu(gw.proc.pid)
        res = loop.run_until_complete(load(args.duration))
        threads = {
            k: round((v - threads_before.get(k, 0.0)) * 1000 / max(1, res.verified), 3)
            for k, v in thread_cpu(gw.proc.pid).items()
        }
        loop.close()
        if prof is None:
            gw.proc.send_signal(signal.SIGUSR2)
            time.sleep(1.0)
            gw.stop()
            print(f"verified {res.verified}, errors {res.errors}")
            print(f"cProfile stats: {args.cprofile} (python -m pstats)")
            return 0
        prof.wait(60)
        shares = breakdown(raw.read_text())
        out = {
            "caller": args.caller,
            "upstream": args.upstream,
            "stream": args.stream,
            "verified": res.verified,
            "errors": res.errors,
            "shares_pct": shares,
            "cpu_ms_per_request_by_thread": threads,
        }
        print(json.dumps(out, indent=1))
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(out, indent=1))
        return 0 if not res.errors else 1
    finally:
        if gw is not None:
            gw.stop()
        runmod.stop(fake)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
