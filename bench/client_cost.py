"""CPU of the upstream side alone: request → response → SSE + dialect decode → close, in one process.

``run.py`` measures the whole gateway, and on a shared, loaded machine its per-stream figure
moves by ±25 % between runs: more than the difference between two upstream clients. This measures
only what the upstream client change touches (``Provider.send``, ``HttpEventSource``, the
transport), as the CPU time of this process (``time.process_time``) over N streams at concurrency
C against ``fake_upstream.py`` in its own process. Variants run in separate processes, interleaved,
so they see the same load:

    python bench/client_cost.py compare --base-root /path/to/old/checkout -r 3

``--base-root``: a checkout of the code before the change (its ``gateway`` package is imported
instead of this one's); ``--transport``: the provider's ``transport`` (omitted for the old code).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


async def measure(
    root: str, transport: str | None, port: int, streams: int, concurrency: int, chunks: int, gap_us: int
) -> dict[str, float]:
    sys.path.insert(0, root)
    from gateway.dialects.base import UpstreamCall
    from gateway.dialects.registry import codec_for
    from gateway.settings import ProviderSettings
    from gateway.upstream.providers import Provider
    from gateway.upstream.source import HttpEventSource

    extra = {"transport": transport} if transport else {}
    provider = Provider(
        ProviderSettings(
            name="up",
            dialect="openai-chat",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="k",
            max_retries=0,
            **extra,
        )
    )  # type: ignore[arg-type]
    provider.start()
    codec = codec_for("openai-chat")
    model = f"bench-chunks{chunks}" + (f"-gap{gap_us}" if gap_us else "")
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = 0

    async def one() -> None:
        nonlocal events
        response = await provider.send(UpstreamCall(path="/chat/completions", body=body))
        source = HttpEventSource(provider, response, codec)
        try:
            while not source.done:
                events += len(await source.next_batch())
        finally:
            await source.aclose()

    async def run(n: int) -> None:
        queue = iter(range(n))

        async def worker() -> None:
            for _ in queue:
                await one()

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    await run(max(concurrency * 4, 32))  # warm: imports, pooled connections, URL cache
    events = 0
    cpu, wall = time.process_time(), time.perf_counter()
    await run(streams)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await provider.close()
    return {"cpu_ms_per_stream": cpu * 1000 / streams, "events_per_stream": events / streams, "wall_s": wall}


def one_main(args: argparse.Namespace) -> None:
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    result = loop.run_until_complete(
        measure(args.root, args.transport, args.port, args.streams, args.concurrency, args.chunks, args.gap_us)
    )
    print(json.dumps(result))


def compare_main(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(BENCH))
    from run import free_port, stop, wait_http  # type: ignore[import-not-found]

    port = free_port()
    fake = subprocess.Popen(
        [sys.executable, str(BENCH / "fake_upstream.py"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    variants = [
        ("before", args.base_root, None),
        ("gateway", str(BENCH.parent), "gateway"),
        ("httpx", str(BENCH.parent), "httpx"),
    ]
    cases = [
        ("50 chunks, burst", 50, 0, args.streams),
        ("500 chunks, burst", 500, 0, args.streams // 2),
        ("50 chunks, 1 per read", 50, args.gap_us, args.streams // 4),
        ("500 chunks, 1 per read", 500, args.gap_us, args.streams // 8),
    ]
    results: dict[tuple[str, str], list[float]] = {}
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", fake, 10, "the fake upstream", None)
        for rep in range(args.repetitions):
            for case, chunks, gap, n in cases:
                for name, root, transport in variants:
                    cmd = [
                        sys.executable,
                        __file__,
                        "one",
                        "--root",
                        root,
                        "--port",
                        str(port),
                        "-n",
                        str(n),
                        "-c",
                        str(args.concurrency),
                        "--chunks",
                        str(chunks),
                        "--gap-us",
                        str(gap),
                    ]
                    if transport:
                        cmd += ["--transport", transport]
                    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
                    results.setdefault((case, name), []).append(out["cpu_ms_per_stream"])
                    print(
                        f"rep {rep + 1} {case:24} {name:8} {out['cpu_ms_per_stream']:.3f} ms/stream",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        stop(fake)
    med = {key: statistics.median(values) for key, values in results.items()}
    print(
        "| case | before ms/stream | gateway transport | ratio | httpx transport | ratio |\n|---|---:|---:|---:|---:|---:|"
    )
    for case, *_ in cases:
        b, g, h = med[(case, "before")], med[(case, "gateway")], med[(case, "httpx")]
        print(f"| {case} | {b:.3f} | {g:.3f} | {g / b:.2f} | {h:.3f} | {h / b:.2f} |")
    for label, lo, hi, div in (
        ("per extra chunk, burst (µs)", "50 chunks, burst", "500 chunks, burst", 450),
        ("per extra chunk, 1 per read (µs)", "50 chunks, 1 per read", "500 chunks, 1 per read", 450),
    ):
        per = {name: (med[(hi, name)] - med[(lo, name)]) * 1000 / div for name, _, _ in variants}
        print(
            f"| {label} | {per['before']:.1f} | {per['gateway']:.1f} | {per['gateway'] / per['before']:.2f} | {per['httpx']:.1f} | {per['httpx'] / per['before']:.2f} |"
        )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({f"{c}|{n}": v for (c, n), v in results.items()}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    one = sub.add_parser("one", help="one variant, one case (prints JSON)")
    one.add_argument("--root", required=True)
    one.add_argument("--transport", default=None)
    one.add_argument("--port", type=int, required=True)
    one.add_argument("-n", "--streams", type=int, default=400)
    one.add_argument("-c", "--concurrency", type=int, default=16)
    one.add_argument("--chunks", type=int, default=50)
    one.add_argument("--gap-us", type=int, default=0)
    cmp = sub.add_parser("compare", help="before vs both transports, interleaved, medians")
    cmp.add_argument("--base-root", required=True)
    cmp.add_argument("-r", "--repetitions", type=int, default=3)
    cmp.add_argument("-n", "--streams", type=int, default=800)
    cmp.add_argument("-c", "--concurrency", type=int, default=16)
    cmp.add_argument("--gap-us", type=int, default=1000)
    cmp.add_argument("--json-out", default=None)
    args = ap.parse_args()
    one_main(args) if args.cmd == "one" else compare_main(args)


if __name__ == "__main__":
    main()
