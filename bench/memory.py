"""Memory per open stream: N concurrent open streams through ONE gateway process, RSS measured at N.

The acceptance criterion (failure-semantics issue): RSS under 1 GiB with 10,000 concurrent open
streams in one process.

    python bench/memory.py                        # 10,000 streams, anthropic caller -> openai-chat upstream
    python bench/memory.py -n 2000 --json-out /tmp/mem.json

What it does:

* starts a *holding* fake upstream (``python bench/soak.py fake --mode hold``): every reply sends its
  first SSE event, then holds the stream open until this script sends it SIGUSR1 (or ``--max-hold``
  seconds pass), then sends the rest;
* starts one gateway worker with provider ``max_connections`` = ``--max-connections`` (default 20000),
  RLIMIT_NOFILE raised as far as allowed (inherited), access log off;
* warms up (a few held streams, released), reads the idle RSS;
* ramps up N streams, one connection each (at most ``--max-pending`` requests waiting for their first
  byte at a time, at most ``--rate`` new streams per second), until every stream has received its
  first body byte, or ``--ramp-timeout`` seconds;
* reads the gateway's VmRSS / open FDs at that point, releases the fake, waits for every stream to
  finish and verifies each one (loadgen.py's verification), reads RSS again after the close.

Reported: RSS idle, RSS with N open, (RSS at N - idle) / N in KiB per stream, ramp time, errors.
Exit code 0 = N open, zero errors and RSS under ``--max-rss-mb``; 1 = not; 2 = setup failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import loadgen  # noqa: E402
from run import BenchError  # noqa: E402
from soak import (  # noqa: E402
    Procs,
    Sampler,
    TapConn,
    Tracker,
    one_stream,
    proc_cpu,
    proc_fds,
    proc_nofile,
    proc_status,
    raise_nofile,
    read_fake_stats,
)


def lag_buckets(port: int) -> dict[float, float]:
    """The gateway's ``gateway_event_loop_lag_seconds`` histogram: {upper bound: cumulative count}."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("gateway_event_loop_lag_seconds_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[float(le)] = float(line.rsplit(" ", 1)[1])
    return out


def lag_summary(before: dict[float, float], after: dict[float, float]) -> dict:
    """The samples taken between two readings: how many, and the bucket bounds of their p50 / p99 / max
    (the sampler wakes every 0.25 s; a sample is how late the loop ran a due timer)."""
    delta = {le: after.get(le, 0) - before.get(le, 0) for le in sorted(after)}
    total = delta.get(float("inf"), 0)

    def bound(q: float) -> float | None:
        for le, n in delta.items():
            if total and n >= q * total:
                return le
        return None

    return {"samples": total, "p50_le_s": bound(0.5), "p99_le_s": bound(0.99), "max_le_s": bound(1.0)}


def fake_now(procs: Procs) -> dict:
    rows = read_fake_stats(procs.fake_log)
    return rows[-1] if rows else {}


async def measure(args: argparse.Namespace, procs: Procs, tracker: Tracker) -> dict:
    gw_pid = procs.gw.pid  # type: ignore[union-attr]
    fake_pid = procs.fake.pid  # type: ignore[union-attr]
    host, port = "127.0.0.1", procs.gw_port
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    out: dict = {}

    # warm-up: 20 held streams, released once all are open (pools, lazy imports; not counted)
    warm_tr = Tracker()
    warm_req = loadgen.build_request(args.caller, "mem-warm")
    warm = [
        asyncio.ensure_future(one_stream(TapConn(host, port), warm_tr, args.caller, warm_req, 3, 60)) for _ in range(20)
    ]
    t = time.monotonic()
    while warm_tr.first + warm_tr.errors < 20 and time.monotonic() - t < 30:
        await asyncio.sleep(0.1)
    os.kill(fake_pid, signal.SIGUSR1)
    await asyncio.wait(warm, timeout=60)
    if warm_tr.errors or warm_tr.verified != 20:
        raise BenchError(f"warm-up streams failed: {warm_tr.verified} verified, {warm_tr.error_samples}")
    await asyncio.sleep(3)
    out["idle"] = proc_status(gw_pid)
    out["idle_fds"] = proc_fds(gw_pid)
    log(f"idle: RSS {out['idle'].get('VmRSS', 0) / 1024:.1f} MB, {out['idle_fds']} FDs")

    lag_idle = lag_buckets(port)
    req = loadgen.build_request(args.caller, "mem")
    sem = asyncio.Semaphore(args.max_pending)
    sampler = Sampler(gw_pid, tracker, 1.0, max_samples=int(args.ramp_timeout + args.max_hold + 300))
    sampler.start()
    cpu0 = proc_cpu(gw_pid)
    t0 = time.monotonic()
    ramp_deadline = t0 + args.ramp_timeout
    tasks: list[asyncio.Future] = []

    async def stream() -> None:
        released = [False]

        def first() -> None:
            if not released[0]:
                released[0] = True
                sem.release()

        conn = TapConn(host, port)
        try:
            await one_stream(
                conn, tracker, args.caller, req, args.chunks, args.ramp_timeout + args.max_hold + 120, on_first=first
            )
        finally:
            first()  # an error before the first byte frees the slot too
            await conn.close()

    async def ramp() -> None:
        for i in range(args.streams):
            if time.monotonic() > ramp_deadline:
                return
            await sem.acquire()
            tasks.append(asyncio.ensure_future(stream()))
            if args.rate:
                lag = t0 + (i + 1) / args.rate - time.monotonic()
                if lag > 0:
                    await asyncio.sleep(lag)

    ramp_task = asyncio.ensure_future(ramp())
    last_log = 0.0
    t_all_open = None
    while time.monotonic() < ramp_deadline:
        if tracker.first >= args.streams:
            t_all_open = time.monotonic() - t0
            break
        if ramp_task.done() and tracker.first + tracker.errors >= len(tasks):
            break  # everything started has opened or failed (ramp cut by the deadline)
        if time.monotonic() - last_log >= 5:
            last_log = time.monotonic()
            st = proc_status(gw_pid)
            log(
                f"  {last_log - t0:6.1f} s: started {tracker.started}, open {tracker.open}, errors {tracker.errors}, "
                f"gateway RSS {st.get('VmRSS', 0) / 1024:.1f} MB, FDs {proc_fds(gw_pid)}, fake held {fake_now(procs).get('held')}"
            )
        await asyncio.sleep(0.1)
    t_ramp = time.monotonic() - t0
    ramp_task.cancel()
    cpu_ramp = proc_cpu(gw_pid) - cpu0
    out.update(
        t_all_open=t_all_open,
        t_ramp=t_ramp,
        cpu_ramp_s=cpu_ramp,
        open_at_peak=tracker.open,
        started=tracker.started,
        errors_during_ramp=tracker.errors,
        error_samples_ramp=dict(tracker.error_samples),
    )
    log(
        f"ramp ended after {t_ramp:.1f} s: {tracker.open} open, {tracker.errors} errors, all open: {t_all_open is not None}"
    )
    await asyncio.sleep(args.settle)
    peak = []
    for _ in range(3):
        peak.append(proc_status(gw_pid))
        await asyncio.sleep(1)
    out["loop_lag_ramp"] = lag_summary(lag_idle, lag_buckets(port))  # the accept loop vs the open streams
    out["at_peak"] = peak[-1]
    out["rss_at_peak_kb"] = sum(p.get("VmRSS", 0) for p in peak) / len(peak)
    out["fds_at_peak"] = proc_fds(gw_pid)
    out["open_at_measure"] = tracker.open
    out["fake_at_peak"] = fake_now(procs)
    log(
        f"at peak: {tracker.open} open streams, RSS {out['rss_at_peak_kb'] / 1024:.1f} MB, {out['fds_at_peak']} FDs, fake {out['fake_at_peak']}"
    )

    # release, and wait for every stream to end (verified or not)
    t_rel = time.monotonic()
    os.kill(fake_pid, signal.SIGUSR1)
    pending: set = set(tasks)
    close_deadline = t_rel + args.max_hold + 120
    while pending and time.monotonic() < close_deadline:
        _, pending = await asyncio.wait(pending, timeout=2)
        if pending:  # requests that reached the fake after the release are held again: release them too
            os.kill(fake_pid, signal.SIGUSR1)
    for p in pending:
        p.cancel()
    out["unfinished"] = len(pending)
    out["t_close"] = time.monotonic() - t_rel
    out["cpu_total_s"] = proc_cpu(gw_pid) - cpu0
    sampler.stop()
    await asyncio.sleep(3)
    out["after_close"] = proc_status(gw_pid)
    out["fds_after_close"] = proc_fds(gw_pid)
    await asyncio.sleep(args.idle_after)
    out["after_close_idle"] = proc_status(gw_pid)
    out["fds_after_close_idle"] = proc_fds(gw_pid)
    out["samples"] = sampler.rows
    return out


def summarize(args: argparse.Namespace, res: dict, tracker: Tracker, nofile: tuple[int, int], gw_nofile: str) -> dict:
    idle_kb = res["idle"].get("VmRSS", 0)
    peak_kb = res["rss_at_peak_kb"]
    n_open = res["open_at_measure"]
    s = {
        "streams": args.streams,
        "caller": args.caller,
        "upstream": args.upstream,
        "cpus": os.cpu_count(),
        "nofile_load": list(nofile),
        "nofile_gateway": gw_nofile,
        "max_connections": args.max_connections,
        "open_at_measure": n_open,
        "all_open": res["t_all_open"] is not None,
        "ramp_s": round(res["t_ramp"], 1),
        "ramp_streams_per_s": round(res["open_at_peak"] / res["t_ramp"], 1) if res["t_ramp"] else None,
        "gateway_cpu_ramp_s": round(res["cpu_ramp_s"], 1),
        "rss_idle_mb": round(idle_kb / 1024, 1),
        "rss_at_peak_mb": round(peak_kb / 1024, 1),
        "kib_per_stream": round((peak_kb - idle_kb) / n_open, 1) if n_open else None,
        "hwm_mb": round(res["after_close"].get("VmHWM", 0) / 1024, 1),
        "fds_idle": res["idle_fds"],
        "fds_at_peak": res["fds_at_peak"],
        "gateway_threads_at_peak": res["at_peak"].get("Threads"),
        "fake_held_at_peak": res["fake_at_peak"].get("held"),
        "fake_open_conns_at_peak": res["fake_at_peak"].get("open_conns"),
        "rss_after_close_mb": round(res["after_close"].get("VmRSS", 0) / 1024, 1),
        "rss_after_close_idle_mb": round(res["after_close_idle"].get("VmRSS", 0) / 1024, 1),
        "fds_after_close_idle": res["fds_after_close_idle"],
        "close_s": round(res["t_close"], 1),
        "gateway_cpu_total_s": round(res["cpu_total_s"], 1),
        "started": tracker.started,
        "verified": tracker.verified,
        "errors": tracker.errors,
        "error_samples": tracker.error_samples,
        "errors_during_ramp": res["errors_during_ramp"],
        "loop_lag_ramp": res["loop_lag_ramp"],
        "unfinished": res.get("unfinished", 0),
    }
    s["pass"] = bool(
        s["all_open"] and tracker.errors == 0 and tracker.verified == args.streams and peak_kb / 1024 < args.max_rss_mb
    )
    return s


def print_report(s: dict, samples: list[dict]) -> None:
    print(
        f"\nMemory: {s['streams']} concurrent held {s['caller']} -> {s['upstream']} streams through one gateway process, {s['cpus']} CPUs, "
        f"RLIMIT_NOFILE load {s['nofile_load'][0]}/{s['nofile_load'][1]}, gateway {s['nofile_gateway']}, max_connections {s['max_connections']}\n"
    )
    print(
        "| streams open at the measurement | ramp s (streams/s) | RSS idle MB | RSS with streams open MB | KiB per open stream | gateway FDs open | "
        "RSS after close MB (+10 s) | verified | errors |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {s['open_at_measure']} of {s['streams']} | {s['ramp_s']} ({s['ramp_streams_per_s']}) | {s['rss_idle_mb']} | {s['rss_at_peak_mb']} | "
        f"{s['kib_per_stream']} | {s['fds_at_peak']} | {s['rss_after_close_mb']} ({s['rss_after_close_idle_mb']}) | {s['verified']} | {s['errors']} |"
    )
    print(
        "\nramp (every 5 s): "
        + ", ".join(f"{r['t']:.0f}s {r['open']} open/{r['rss_kb'] / 1024:.0f} MB/{r['fds']} fds" for r in samples[::5])
    )
    lag = s["loop_lag_ramp"]
    print(
        f"event-loop lag during the ramp and at the peak ({lag['samples']:.0f} samples): p50 <= {lag['p50_le_s']} s, "
        f"p99 <= {lag['p99_le_s']} s, max <= {lag['max_le_s']} s"
    )
    for reason, count in s["error_samples"].items():
        print(f"  {count} x {reason}")
    print(
        f"\n{'PASS' if s['pass'] else 'FAIL'}: {s['open_at_measure']} open, errors {s['errors']}, RSS {s['rss_at_peak_mb']} MB"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="RSS of one gateway process with N concurrent open streams (see bench/README.md)."
    )
    ap.add_argument("-n", "--streams", type=int, default=10000)
    ap.add_argument("--caller", default="anthropic", choices=loadgen.DIALECTS)
    ap.add_argument("--upstream", default="openai-chat", choices=loadgen.DIALECTS)
    ap.add_argument(
        "--chunks",
        type=int,
        default=20,
        help="text fragments per stream (the first event is sent at once, the rest on release)",
    )
    ap.add_argument("--max-pending", type=int, default=256, help="requests sent but without a first byte yet, at most")
    ap.add_argument("--rate", type=float, default=1000.0, help="new streams per second, at most (0 = no cap)")
    ap.add_argument(
        "--ramp-timeout", type=float, default=240.0, help="give up opening more streams after this many seconds"
    )
    ap.add_argument("--settle", type=float, default=3.0, help="seconds to wait at the peak before reading RSS")
    ap.add_argument(
        "--max-hold", type=float, default=600.0, help="the fake releases a held stream after this many seconds anyway"
    )
    ap.add_argument("--idle-after", type=float, default=10.0)
    ap.add_argument(
        "--max-connections", type=int, default=20000, help="provider max_connections in the generated config"
    )
    ap.add_argument(
        "--transport",
        choices=["gateway", "httpx"],
        default=None,
        help="the provider's upstream transport (default: the gateway's)",
    )
    ap.add_argument(
        "--keepalive-seconds", type=float, default=None, help="server.keepalive_seconds (default: the gateway's)"
    )
    ap.add_argument("--max-rss-mb", type=float, default=1024.0)
    ap.add_argument(
        "--nofile",
        type=int,
        default=65536,
        help="RLIMIT_NOFILE wanted (soft up to the hard limit unless root may raise it)",
    )
    ap.add_argument("--gateway-port", type=int, default=0)
    ap.add_argument("--fake-port", type=int, default=0)
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    if args.transport:
        os.environ["BENCH_TRANSPORT"] = args.transport  # read by write_config
    if args.streams > 30000:
        ap.error("bounded: at most 30000 streams")
    nofile = raise_nofile(args.nofile)
    need = 2 * args.streams + 100
    if nofile[0] < need:
        print(
            f"WARNING: RLIMIT_NOFILE is {nofile[0]} (hard {nofile[1]}, cannot raise further): the gateway needs about 2 FDs per stream "
            f"(caller socket + upstream socket) = {need} for {args.streams} streams; expect it to run out near {(nofile[0] - 40) // 2} streams",
            file=sys.stderr,
        )
    fake_args = [
        "--mode",
        "hold",
        "--chunks",
        str(args.chunks),
        "--max-hold",
        str(args.max_hold),
        "--nofile",
        str(args.nofile),
    ]
    tracker = Tracker()
    try:
        with Procs(
            fake_args,
            args.upstream,
            {"mem": args.chunks, "mem-warm": 3},
            args.max_connections,
            args.keep,
            args.gateway_port,
            args.fake_port,
            args.keepalive_seconds,
        ) as procs:
            gw_nofile = proc_nofile(procs.gw.pid)  # type: ignore[union-attr]
            loop = loadgen.new_loop()
            try:
                res = loop.run_until_complete(
                    asyncio.wait_for(measure(args, procs, tracker), args.ramp_timeout + 2 * args.max_hold + 400)
                )
            finally:
                loop.close()
            if procs.gw.poll() is not None:  # type: ignore[union-attr]
                print("ERROR: the gateway exited during the run" + procs.gateway_log_tail(), file=sys.stderr)
                procs.keep = True
            s = summarize(args, res, tracker, nofile, gw_nofile)
            print_report(s, res["samples"])
            if args.json_out:
                Path(args.json_out).write_text(
                    json.dumps(
                        {"summary": s, "samples": res["samples"], "fake": read_fake_stats(procs.fake_log)},
                        indent=1,
                        default=str,
                    )
                )
            if not s["pass"]:
                procs.keep = True
                print(procs.gateway_log_tail(40), file=sys.stderr)
            return 0 if s["pass"] else 1
    except BenchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
