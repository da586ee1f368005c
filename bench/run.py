"""Benchmark the gateway against the fake upstream: every caller x upstream dialect pair.

Starts ``bench/fake_upstream.py`` and the gateway (``python -m gateway serve --config <generated> --port P``)
as subprocesses, then for each caller x upstream pair and each concurrency measures, with every
stream verified by ``bench/loadgen.py``:

* streams/s                 verified streams per second of wall time
* gateway CPU ms / stream   (utime + stime of the gateway process tree, from /proc/PID/stat) / streams
* TTFB p50 / p99            time to the first body byte, and how much the gateway adds over the same
                            load sent straight to the fake in the upstream's dialect
* RSS                       the gateway's VmRSS (/proc/PID/status) after the run
* upstream conns/stream     new TCP connections the fake accepted per stream (0 = pooled, 1 = one per request)
* per-chunk cost            (CPU/stream at 500 chunks - CPU/stream at 50 chunks) / 450

    python bench/run.py              # full matrix: 16 pairs x concurrency 1, 16, 64 (a few minutes)
    python bench/run.py --quick      # a small subset (under a minute)
    python bench/run.py --callers anthropic --upstreams gemini,openai-chat -c 1,16 -d 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
import loadgen  # noqa: E402
from loadgen import DIALECTS, Result, run_load  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
BASES = {"anthropic": "", "openai-chat": "/v1", "openai-responses": "/v1", "gemini": ""}


class BenchError(RuntimeError):
    pass


# ---------------------------------------------------------------------------------------------
# /proc readings


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(entry))
    return kids


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(_children(p))
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` and its live descendants (uvicorn workers, if any)."""
    total = 0
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / CLK_TCK


def rss_mb(pid: int) -> float:
    total = 0
    for p in _tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


# ---------------------------------------------------------------------------------------------
# processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_http(url: str, proc: subprocess.Popen, timeout: float, what: str, log: Path | None) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{what} exited with code {proc.returncode} before answering {url}" + _log_tail(log))
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
                last = f"HTTP {r.status}"
        except Exception as exc:  # connection refused while starting, HTTP errors
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(0.1)
    raise BenchError(f"{what} did not answer {url} within {timeout:.0f} s (last: {last})" + _log_tail(log))


def _log_tail(log: Path | None, n: int = 40) -> str:
    if not log or not log.exists():
        return ""
    lines = log.read_text(errors="replace").splitlines()[-n:]
    return f"\n--- last {len(lines)} lines of {log} ---\n" + "\n".join(lines)


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def gateway_python() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def write_config(
    path: Path, gw_port: int, fake_port: int, chunk_counts: list[int], gap_us: int = 0, transport: str = "gateway"
) -> None:
    fake = f"http://127.0.0.1:{fake_port}"
    lines = [
        "# generated by bench/run.py",
        "[server]",
        'host = "127.0.0.1"',
        f"port = {gw_port}",
        "access_log = false",
        "",
        "[auth]",
        'keys_env = "BENCH_GATEWAY_KEYS_UNSET"',
        "",
        "[store]",
        'url = "sqlite:///bench-gateway-state.db"',
        "",
    ]
    for d in DIALECTS:
        lines += [
            "[[providers]]",
            f'name = "up-{d}"',
            f'dialect = "{d}"',
            f'base_url = "{fake}{BASES[d]}"',
            'api_key = "bench-upstream-key"',
            "max_retries = 0",
            f'transport = "{transport}"',
            "",
        ]
    for d in DIALECTS:
        for n in chunk_counts:
            model = f"bench-{d}" if n == chunk_counts[0] else f"bench-{d}-{n}"
            lines += [
                "[[routes]]",
                f'model = "{model}"',
                f'provider = "up-{d}"',
                f'upstream_model = "bench-chunks{n}"',
                "",
            ]
            if gap_us:  # the same reply, one event per upstream write gap_us apart (the per-read table)
                lines += [
                    "[[routes]]",
                    f'model = "{model}-spread"',
                    f'provider = "up-{d}"',
                    f'upstream_model = "bench-chunks{n}-gap{gap_us}"',
                    "",
                ]
    path.write_text("\n".join(lines))


def route_model(upstream: str, chunks: int, base_chunks: int) -> str:
    return f"bench-{upstream}" if chunks == base_chunks else f"bench-{upstream}-{chunks}"


# ---------------------------------------------------------------------------------------------
# measuring


def fake_connections(fake_url: str | None) -> int | None:
    """TCP connections the fake upstream has accepted so far (its GET /stats)."""
    if not fake_url:
        return None
    try:
        with urllib.request.urlopen(fake_url + "/stats", timeout=2) as r:
            return int(json.loads(r.read())["connections"])
    except Exception:
        return None


async def measure(
    url: str,
    caller: str,
    model: str,
    conc: int,
    duration: float,
    chunks: int,
    pid: int | None,
    fake_url: str | None = None,
) -> tuple[Result, float | None, float | None, float | None]:
    """Warm up, then one measured run. Returns (result, gateway CPU ms per verified stream, RSS MB,
    new upstream connections per stream: ~0 when the gateway's upstream pool reuses connections)."""
    await run_load(url, caller, model, conc, requests=max(conc * 2, 10), chunks=chunks)
    before = cpu_seconds(pid) if pid else 0.0
    conns = fake_connections(fake_url)
    res = await run_load(url, caller, model, conc, duration=duration, chunks=chunks)
    cpu = (cpu_seconds(pid) - before) * 1000 / res.verified if pid and res.verified else None
    conns_after = fake_connections(fake_url)
    per_stream = (
        (conns_after - conns) / (res.verified + res.errors)
        if conns is not None and conns_after is not None and res.verified + res.errors
        else None
    )
    return res, cpu, (rss_mb(pid) if pid else None), per_stream


def fmt(x: float | None, nd: int = 2, signed: bool = False) -> str:
    if x is None or x != x:
        return "—"
    return f"{x:+.{nd}f}" if signed else f"{x:.{nd}f}"


async def bench(
    args: argparse.Namespace, gw_url: str, fake_url: str, gw_pid: int
) -> tuple[list[dict], list[dict], int]:
    rows, chunk_rows, errors = [], [], 0
    direct: dict[tuple[str, int], Result] = {}
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    for up in args.upstreams:
        for c in args.concurrency:
            res, _, _, _ = await measure(
                fake_url + BASES[up], up, f"bench-chunks{args.chunks[0]}", c, args.duration, args.chunks[0], None
            )
            direct[(up, c)] = res
            errors += res.errors
            log(
                f"direct {up:16} c={c:<3} {res.streams_per_s:8.1f} streams/s  TTFB p50 {res.pct(50):.2f} ms  errors {res.errors}"
            )
    for caller, up in args.pairs:
        if True:
            for c in args.concurrency:
                res, cpu, rss, conns = await measure(
                    gw_url,
                    caller,
                    route_model(up, args.chunks[0], args.chunks[0]),
                    c,
                    args.duration,
                    args.chunks[0],
                    gw_pid,
                    fake_url,
                )
                d = direct[(up, c)]
                errors += res.errors
                row = {
                    **res.summary(),
                    "caller": caller,
                    "upstream": up,
                    "cpu_ms_per_stream": cpu,
                    "rss_mb": rss,
                    "upstream_conns_per_stream": conns,
                    "ttfb_p50_added_ms": res.pct(50) - d.pct(50),
                    "ttfb_p99_added_ms": res.pct(99) - d.pct(99),
                    "direct_streams_per_s": d.streams_per_s,
                }
                rows.append(row)
                log(
                    f"{caller:16} -> {up:16} c={c:<3} {res.streams_per_s:8.1f} streams/s  CPU {fmt(cpu)} ms/stream  "
                    f"TTFB p50 {res.pct(50):.2f} ms  upstream conns/stream {fmt(conns)}  errors {res.errors}"
                    + (f"  {res.error_samples}" if res.errors else "")
                )
    if len(args.chunks) == 2 and not args.no_per_chunk:
        lo, hi = args.chunks
        c = args.per_chunk_concurrency
        for caller, up in args.per_chunk_pairs:
            r_lo, cpu_lo, _, _ = await measure(gw_url, caller, route_model(up, lo, lo), c, args.duration, lo, gw_pid)
            r_hi, cpu_hi, _, _ = await measure(gw_url, caller, route_model(up, hi, lo), c, args.duration, hi, gw_pid)
            errors += r_lo.errors + r_hi.errors
            per = (cpu_hi - cpu_lo) / (hi - lo) * 1000 if cpu_lo is not None and cpu_hi is not None else None
            chunk_rows.append(
                {
                    "caller": caller,
                    "upstream": up,
                    "concurrency": c,
                    f"cpu_ms_{lo}": cpu_lo,
                    f"cpu_ms_{hi}": cpu_hi,
                    "us_per_chunk": per,
                    "errors": r_lo.errors + r_hi.errors,
                    "error_samples": {**r_lo.error_samples, **r_hi.error_samples},
                }
            )
            log(
                f"per-chunk {caller:16} -> {up:16} {fmt(cpu_lo)} ms @{lo}, {fmt(cpu_hi)} ms @{hi}: {fmt(per, 1)} µs/chunk"
            )
            if args.gap_us:
                s_lo, scpu_lo, _, _ = await measure(
                    gw_url, caller, route_model(up, lo, lo) + "-spread", c, args.duration, lo, gw_pid
                )
                s_hi, scpu_hi, _, _ = await measure(
                    gw_url, caller, route_model(up, hi, lo) + "-spread", c, args.duration, hi, gw_pid
                )
                errors += s_lo.errors + s_hi.errors
                sper = (scpu_hi - scpu_lo) / (hi - lo) * 1000 if scpu_lo is not None and scpu_hi is not None else None
                chunk_rows[-1].update(
                    {
                        f"spread_cpu_ms_{lo}": scpu_lo,
                        f"spread_cpu_ms_{hi}": scpu_hi,
                        "spread_us_per_chunk": sper,
                        "errors": chunk_rows[-1]["errors"] + s_lo.errors + s_hi.errors,
                    }
                )
                log(
                    f"  spread ({args.gap_us} µs apart): {fmt(scpu_lo)} ms @{lo}, {fmt(scpu_hi)} ms @{hi}: {fmt(sper, 1)} µs/chunk"
                )
    return rows, chunk_rows, errors


def markdown(rows: list[dict], chunk_rows: list[dict], chunks: list[int], gap_us: int = 0) -> str:
    out = [
        "| caller | upstream | C | streams/s | gateway CPU ms/stream | TTFB p50 ms (added) | TTFB p99 ms (added) | RSS MB | upstream conns/stream | errors |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['caller']} | {r['upstream']} | {r['concurrency']} | {r['streams_per_s']:.0f} | {fmt(r['cpu_ms_per_stream'])} | "
            f"{fmt(r['ttfb_p50_ms'])} ({fmt(r['ttfb_p50_added_ms'], signed=True)}) | {fmt(r['ttfb_p99_ms'])} ({fmt(r['ttfb_p99_added_ms'], signed=True)}) | "
            f"{fmt(r['rss_mb'], 0)} | {fmt(r['upstream_conns_per_stream'])} | {r['errors']} |"
        )
    if chunk_rows:
        lo, hi = chunks
        out += [
            "",
            f"Per-chunk cost (concurrency {chunk_rows[0]['concurrency']}): gateway CPU per stream at {lo} and {hi} text chunks.",
            "",
            f"| caller | upstream | CPU ms/stream @{lo} | CPU ms/stream @{hi} | µs per chunk | errors |",
            "|---|---|---:|---:|---:|---:|",
        ]
        if gap_us:
            out[-2] = out[-2].replace(
                " errors |",
                f" CPU ms @{lo}, one event per read | CPU ms @{hi}, one event per read | µs per chunk, one event per read | errors |",
            )
            out[-1] += "---:|---:|---:|"
        for r in chunk_rows:
            spread = (
                f" {fmt(r.get(f'spread_cpu_ms_{lo}'))} | {fmt(r.get(f'spread_cpu_ms_{hi}'))} | {fmt(r.get('spread_us_per_chunk'), 1)} |"
                if gap_us
                else ""
            )
            out.append(
                f"| {r['caller']} | {r['upstream']} | {fmt(r[f'cpu_ms_{lo}'])} | {fmt(r[f'cpu_ms_{hi}'])} | {fmt(r['us_per_chunk'], 1)} |{spread} {r['errors']} |"
            )
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Gateway streaming benchmark (see bench/README.md).")
    ap.add_argument(
        "--quick", action="store_true", help="small subset: same-dialect pairs plus two translations, C=1,16, 1 s each"
    )
    ap.add_argument("--callers", default=",".join(DIALECTS))
    ap.add_argument("--upstreams", default=",".join(DIALECTS))
    ap.add_argument("-c", "--concurrency", default="1,16,64")
    ap.add_argument("-d", "--duration", type=float, default=3.0, help="seconds per measured run")
    ap.add_argument(
        "--chunks", default="50,500", help="base chunk count, and the second count for the per-chunk estimate"
    )
    ap.add_argument("--per-chunk-concurrency", type=int, default=16)
    ap.add_argument("--no-per-chunk", action="store_true")
    ap.add_argument(
        "--gap-us",
        type=int,
        default=0,
        help="also measure the per-chunk cost with every upstream event in its own write, this many µs apart (e.g. 1000)",
    )
    ap.add_argument(
        "--transport",
        choices=["gateway", "httpx"],
        default="gateway",
        help="the providers' upstream transport (README: Upstream transports)",
    )
    ap.add_argument("--gateway-port", type=int, default=0, help="default: a free port")
    ap.add_argument(
        "--fake-port", type=int, default=9100, help="the fake upstream's port (a free one if 9100 is taken)"
    )
    ap.add_argument("--gateway-start-timeout", type=float, default=30.0)
    ap.add_argument("--json-out", default=None, help="also write all numbers as JSON here")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (config, logs)")
    args = ap.parse_args(argv)
    args.callers = [d for d in args.callers.split(",") if d]
    args.upstreams = [d for d in args.upstreams.split(",") if d]
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c]
    args.chunks = [int(n) for n in args.chunks.split(",") if n]
    for d in args.callers + args.upstreams:
        if d not in DIALECTS:
            ap.error(f"unknown dialect {d!r} (one of {', '.join(DIALECTS)})")
    if len(args.chunks) not in (1, 2):
        ap.error("--chunks takes one or two counts")
    if args.quick:
        args.concurrency = [1, 16]
        args.duration = min(args.duration, 1.0)
    pairs = [(c, u) for c in args.callers for u in args.upstreams]
    if args.quick:
        keep = {(d, d) for d in DIALECTS} | {("anthropic", "openai-chat"), ("openai-chat", "anthropic")}
        pairs = [p for p in pairs if p in keep] or pairs[:4]
        args.callers = sorted({c for c, _ in pairs}, key=DIALECTS.index)
        args.upstreams = sorted({u for _, u in pairs}, key=DIALECTS.index)
    args.pairs = pairs
    args.per_chunk_pairs = (
        [p for p in pairs if p[0] == p[1]][:2] + [p for p in pairs if p[0] != p[1]][:2] if args.quick else pairs
    )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    fake_port = args.fake_port if not port_in_use(args.fake_port) else free_port()
    gw_port = args.gateway_port or free_port()
    tmp = Path(tempfile.mkdtemp(prefix="gateway-bench-"))
    cfg = tmp / "gateway.toml"
    write_config(cfg, gw_port, fake_port, args.chunks, args.gap_us, args.transport)
    fake = gw = None
    try:
        fake_log = tmp / "fake.log"
        fake = subprocess.Popen(
            [
                sys.executable,
                str(BENCH / "fake_upstream.py"),
                "--port",
                str(fake_port),
                "--chunks",
                str(args.chunks[0]),
            ],
            stdout=fake_log.open("w"),
            stderr=subprocess.STDOUT,
        )
        wait_http(f"http://127.0.0.1:{fake_port}/healthz", fake, 10, "the fake upstream", fake_log)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        gw_log = tmp / "gateway.log"
        cmd = [gateway_python(), "-m", "gateway", "serve", "--config", str(cfg), "--port", str(gw_port)]
        print(f"starting gateway: {' '.join(cmd)} (cwd {tmp})", file=sys.stderr)
        gw = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=gw_log.open("w"), stderr=subprocess.STDOUT)
        try:
            wait_http(f"http://127.0.0.1:{gw_port}/healthz", gw, args.gateway_start_timeout, "the gateway", gw_log)
        except BenchError as exc:
            print(
                f"ERROR: the gateway did not start, so there is nothing to measure.\n{exc}\nconfig: {cfg}",
                file=sys.stderr,
            )
            args.keep = True
            return 2
        try:
            loop = loadgen.new_loop()
            rows, chunk_rows, errors = loop.run_until_complete(
                bench(args, f"http://127.0.0.1:{gw_port}", f"http://127.0.0.1:{fake_port}", gw.pid)
            )
            loop.close()
        finally:
            if gw.poll() is not None:
                print(
                    f"ERROR: the gateway exited (code {gw.returncode}) during the run" + _log_tail(gw_log),
                    file=sys.stderr,
                )
        print(
            f"\nGateway benchmark: {len(args.pairs)} caller×upstream pairs, {args.duration:g} s per run, {args.chunks[0]} text chunks per "
            f"stream, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}.\n"
        )
        print(markdown(rows, chunk_rows, args.chunks, args.gap_us))
        if args.json_out:
            Path(args.json_out).write_text(json.dumps({"rows": rows, "per_chunk": chunk_rows}, indent=1, default=str))
        if errors:
            print(f"\n{errors} streams did NOT verify (see the errors column and the log above).", file=sys.stderr)
            return 1
        return 0
    except BenchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        args.keep = True
        return 2
    finally:
        stop(gw)
        stop(fake)
        if args.keep:
            print(f"(config and logs kept in {tmp})", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
