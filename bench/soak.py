"""Bounded soak test: C concurrent streams for D seconds through ONE gateway worker, every stream verified.

The acceptance criterion (failure-semantics issue): 1,000 concurrent streams for 60 s through one
worker, zero errors, RSS stable within 10 % between the first and the last 10 s.

    python bench/soak.py                          # 1000 streams, 60 s, anthropic caller -> openai-chat upstream
    python bench/soak.py -c 200 -d 20 --caller gemini --upstream anthropic --json-out /tmp/soak.json

What it does:

* starts a *paced* fake upstream (``python bench/soak.py fake ...``: ``bench/fake_upstream.py``'s
  FakeUpstream with the same pre-built replies, but each SSE event written separately with a
  per-stream delay drawn from [--interval-min, --interval-max] between events, so a 50-chunk stream
  lasts ~5-25 s and C streams are really open at once; it prints its counters once a second);
* starts one gateway worker (``python -m gateway serve``) with a generated config (one provider at
  the fake, ``max_retries = 0``, access log off), RLIMIT_NOFILE raised (inherited from this process);
* C workers (loadgen.py's keep-alive client and verification) stream back to back until D seconds
  have passed, then finish the stream they are in (the drain);
* samples the gateway's VmRSS, CPU and open file descriptors once a second, plus the number of
  streams open right now (first body byte received, not yet finished) on the caller side.

Reported: streams verified / errors, RSS mean over the first vs the last ``--window`` seconds of the D
seconds and the % change, RSS idle before and after, gateway CPU (% of one core, ms per stream).
Exit code 0 = zero errors and RSS change within ``--max-rss-change`` %, 1 = not, 2 = setup failed.

``memory.py`` imports the fake, the client and the /proc helpers from here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
import fake_upstream  # noqa: E402
import loadgen  # noqa: E402
from run import BASES, BenchError, _log_tail, free_port, gateway_python, stop, wait_http  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------
# limits and /proc


def raise_nofile(want: int) -> tuple[int, int]:
    """Raise RLIMIT_NOFILE to ``want`` (soft and hard; raising the hard limit needs root), else soft
    up to the hard limit. Children (the fake, the gateway) inherit it. Returns (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM (KiB) and Threads of ``pid``."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def proc_cpu(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (one worker: no children to add)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def proc_nofile(pid: int) -> str:
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return f"{soft}/{hard}"
    except OSError:
        pass
    return "?"


# ---------------------------------------------------------------------------------------------
# the paced / holding fake upstream (runs as ``python bench/soak.py fake``)


class PacedBytes(bytes):
    """A whole reply (so it still works as plain bytes) plus the pieces to write one at a time."""

    parts: list[bytes]


class PacedWriter:
    """Wraps the StreamWriter FakeUpstream.handle writes to: a PacedBytes reply is written piece by
    piece by ``fake.pace`` when handle awaits ``drain()``; everything else passes through."""

    def __init__(self, fake: PacedFake, writer: asyncio.StreamWriter) -> None:
        self._fake, self._w = fake, writer
        self._queued: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        if isinstance(data, PacedBytes):
            self._queued = data.parts
        else:
            self._w.write(data)

    async def drain(self) -> None:
        parts, self._queued = self._queued, None
        if parts is None:
            await self._w.drain()
        else:
            await self._fake.pace(self._w, parts)

    def close(self) -> None:
        self._w.close()

    def __getattr__(self, name: str) -> object:
        return getattr(self._w, name)


class PacedFake(fake_upstream.FakeUpstream):
    """FakeUpstream (same replies, same request parsing) that writes each SSE event separately.

    mode "paced": a per-stream delay drawn from [interval_min, interval_max] between events.
    mode "hold":  the first ``hold_after`` events (2: OpenAI's role-only chunk produces no event, the
                  gateway sends nothing before a real one), then nothing until SIGUSR1 (releases every stream held at that
                  moment) or ``max_hold`` seconds, then the rest at once."""

    def __init__(
        self,
        chunks: int,
        mode: str,
        interval_min: float,
        interval_max: float,
        max_hold: float,
        hold_after: int = 2,
        seed: int = 1,
    ) -> None:
        super().__init__(chunks)
        self.mode = mode
        self.interval = (interval_min, interval_max)
        self.max_hold = max_hold
        self.hold_after = hold_after
        self.rng = random.Random(seed)
        self.active = 0  # replies being written right now
        self.held = 0  # hold mode: replies waiting for the release
        self.finished = 0
        self.hold_timeouts = 0
        self.releases = 0
        self._parts: dict[tuple[str, int, str], list[bytes]] = {}
        self._release: asyncio.Event | None = None

    def reply(self, dialect: str, n: int, corrupt: str, keep_alive: bytes | bool) -> bytes:
        whole = super().reply(dialect, n, corrupt, bool(keep_alive))
        key = (dialect, n, corrupt)
        parts = self._parts.get(key)
        if parts is None:
            parts = [b"%x\r\n%s\r\n" % (len(e), e) for e in fake_upstream.events(dialect, n, corrupt)]
            parts = self._parts[key] = (parts or [b""]) + [b"0\r\n\r\n"]
        head = fake_upstream._HEAD_OK + (
            b"connection: keep-alive\r\n\r\n" if keep_alive else b"connection: close\r\n\r\n"
        )
        out = PacedBytes(whole)
        out.parts = (
            [head + parts[0], *parts[1:-2], parts[-2] + parts[-1]] if len(parts) > 2 else [head + b"".join(parts)]
        )
        return out

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await super().handle(reader, PacedWriter(self, writer))  # type: ignore[arg-type]

    def release(self) -> None:
        if self._release is not None:
            self._release.set()
        self._release = asyncio.Event()
        self.releases += 1

    async def pace(self, w: asyncio.StreamWriter, parts: list[bytes]) -> None:
        self.active += 1
        try:
            if self.mode == "hold":
                w.write(b"".join(parts[: self.hold_after]))
                await w.drain()
                if self._release is None:
                    self._release = asyncio.Event()
                event = self._release
                self.held += 1
                try:
                    await asyncio.wait_for(event.wait(), self.max_hold)
                except TimeoutError:
                    self.hold_timeouts += 1
                finally:
                    self.held -= 1
                w.write(b"".join(parts[self.hold_after :]))
                await w.drain()
            else:
                gap = self.rng.uniform(*self.interval)
                for i, part in enumerate(parts):
                    if i:
                        await asyncio.sleep(gap)
                    w.write(part)
                    await w.drain()
            self.finished += 1
        finally:
            self.active -= 1

    def stats(self) -> dict:
        return {
            "t": round(time.time(), 3),
            "active": self.active,
            "held": self.held,
            "open_conns": self.open,
            "requests": self.requests,
            "connections": self.connections,
            "finished": self.finished,
            "hold_timeouts": self.hold_timeouts,
            "releases": self.releases,
        }

    async def report_forever(self, every: float = 1.0) -> None:
        while True:
            print(json.dumps(self.stats()), flush=True)
            await asyncio.sleep(every)


def fake_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="soak.py fake", description="paced / holding fake upstream (prints JSON counters each second)"
    )
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--chunks", type=int, default=fake_upstream.DEFAULT_CHUNKS)
    ap.add_argument("--mode", choices=("paced", "hold"), default="paced")
    ap.add_argument("--interval-min", type=float, default=0.1)
    ap.add_argument("--interval-max", type=float, default=0.5)
    ap.add_argument(
        "--max-hold", type=float, default=120.0, help="hold mode: release a held stream after this many seconds anyway"
    )
    ap.add_argument("--hold-after", type=int, default=2, help="hold mode: SSE events sent before the hold")
    ap.add_argument("--nofile", type=int, default=65536)
    args = ap.parse_args(argv)
    raise_nofile(args.nofile)
    fake = PacedFake(args.chunks, args.mode, args.interval_min, args.interval_max, args.max_hold, args.hold_after)
    loop = fake_upstream._new_loop()
    asyncio.set_event_loop(loop)
    loop.add_signal_handler(signal.SIGUSR1, fake.release)
    loop.add_signal_handler(signal.SIGTERM, loop.stop)

    def started(port: int) -> None:
        print(
            json.dumps({"ready": port, "mode": args.mode, "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)}),
            flush=True,
        )
        loop.create_task(fake.report_forever())

    try:
        loop.run_until_complete(fake.serve("127.0.0.1", args.port, started))
    except (KeyboardInterrupt, RuntimeError):
        pass
    return 0


def read_fake_stats(log: Path) -> list[dict]:
    rows = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and "active" in obj:
            rows.append(obj)
    return rows


# ---------------------------------------------------------------------------------------------
# the client: loadgen.Conn that reports the first body byte of each stream


class Tracker:
    """Caller-side counters (one event loop; the sampler thread only reads them)."""

    def __init__(self) -> None:
        self.started = 0
        self.first = 0  # streams whose first body byte arrived
        self.open = 0  # ... and that have not finished yet
        self.verified = 0
        self.errors = 0
        self.error_samples: dict[str, int] = {}
        self.ttfb: list[float] = []

    def record(self, v: loadgen.Verdict, ttfb: float) -> None:
        if v.ok:
            self.verified += 1
            self.ttfb.append(ttfb)
        else:
            self.errors += 1
            key = v.reason[:160]
            self.error_samples[key] = self.error_samples.get(key, 0) + 1


class _Tap:
    """The reader handed to Conn._response: calls ``cb`` once, when the first body bytes are read
    (Conn reads chunk-size lines with readline and chunk data with readexactly)."""

    __slots__ = ("_r", "_cb")

    def __init__(self, reader: asyncio.StreamReader, cb: Callable[[], None] | None) -> None:
        self._r, self._cb = reader, cb

    def _fire(self) -> None:
        if self._cb is not None:
            cb, self._cb = self._cb, None
            cb()

    async def readline(self) -> bytes:
        return await self._r.readline()

    async def readexactly(self, n: int) -> bytes:
        data = await self._r.readexactly(n)
        self._fire()
        return data

    async def read(self, n: int = -1) -> bytes:
        data = await self._r.read(n)
        if data:
            self._fire()
        return data


class TapConn(loadgen.Conn):
    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self.on_first: Callable[[], None] | None = None

    async def _response(self, status_line: bytes, t0: float) -> tuple[int, bytes, float, bool]:
        real = self.reader
        ok = status_line.split(b" ", 2)[1:2] == [b"200"]
        self.reader = _Tap(real, self.on_first if ok else None)  # type: ignore[arg-type]
        try:
            return await super()._response(status_line, t0)
        finally:
            if isinstance(self.reader, _Tap):
                self.reader = real


async def one_stream(
    conn: TapConn,
    tracker: Tracker,
    dialect: str,
    req: tuple[str, dict[str, str], bytes],
    chunks: int,
    timeout: float,
    on_first: Callable[[], None] | None = None,
) -> None:
    """One verified stream on ``conn``; keeps ``tracker`` current (open = first byte seen, not finished)."""
    seen = [False]

    def first() -> None:
        seen[0] = True
        tracker.first += 1
        tracker.open += 1
        if on_first is not None:
            on_first()

    conn.on_first = first
    tracker.started += 1
    ttfb = 0.0
    try:
        status, data, ttfb, complete = await conn.request(*req, timeout)
        v = loadgen.verify(dialect, status, data, chunks, complete)
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
        await conn.close()
        v = loadgen.Verdict(False, f"{type(exc).__name__}: {exc}")
    finally:
        conn.on_first = None
        if seen[0]:
            tracker.open -= 1
    tracker.record(v, ttfb)


# ---------------------------------------------------------------------------------------------
# sampling the gateway once a second (a thread, so a busy event loop does not delay it)


class Sampler(threading.Thread):
    def __init__(self, pid: int, tracker: Tracker, every: float = 1.0, max_samples: int = 3600) -> None:
        super().__init__(daemon=True, name="sampler")
        self.pid, self.tracker, self.every, self.max_samples = pid, tracker, every, max_samples
        self.rows: list[dict] = []
        self.t0 = time.monotonic()
        self._halt = threading.Event()

    def sample(self) -> dict:
        st = proc_status(self.pid)
        tr = self.tracker
        return {
            "t": round(time.monotonic() - self.t0, 3),
            "wall": round(time.time(), 3),
            "rss_kb": st.get("VmRSS", -1),
            "hwm_kb": st.get("VmHWM", -1),
            "cpu_s": proc_cpu(self.pid),
            "fds": proc_fds(self.pid),
            "open": tr.open,
            "first": tr.first,
            "started": tr.started,
            "verified": tr.verified,
            "errors": tr.errors,
        }

    def run(self) -> None:
        nxt = time.monotonic()
        while not self._halt.is_set() and len(self.rows) < self.max_samples:
            self.rows.append(self.sample())
            nxt += self.every
            self._halt.wait(max(0.0, nxt - time.monotonic()))

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


# ---------------------------------------------------------------------------------------------
# processes


def write_config(
    path: Path,
    gw_port: int,
    fake_port: int,
    upstream: str,
    routes: dict[str, int],
    max_connections: int | None,
    keepalive_seconds: float | None = None,
) -> None:
    """One provider (``upstream`` dialect) at the fake; each route ``model -> bench-chunks<N>``."""
    lines = [
        "# generated by bench/soak.py / bench/memory.py",
        "[server]",
        'host = "127.0.0.1"',
        f"port = {gw_port}",
        "access_log = false",
    ]
    if keepalive_seconds is not None:
        lines.append(f"keepalive_seconds = {keepalive_seconds}")
    lines += [
        "",
        "[auth]",
        'keys_env = "BENCH_GATEWAY_KEYS_UNSET"',
        "",
        "[store]",
        'url = "sqlite:///bench-gateway-state.db"',
        "",
        "[[providers]]",
        'name = "up"',
        f'dialect = "{upstream}"',
        f'base_url = "http://127.0.0.1:{fake_port}{BASES[upstream]}"',
        'api_key = "bench-upstream-key"',
        "max_retries = 0",
    ]
    if max_connections is not None:
        lines.append(f"max_connections = {max_connections}")
    if os.environ.get("BENCH_TRANSPORT"):  # --transport of soak.py / memory.py
        lines.append(f'transport = "{os.environ["BENCH_TRANSPORT"]}"')
    lines.append("")
    for model, n in routes.items():
        lines += ["[[routes]]", f'model = "{model}"', 'provider = "up"', f'upstream_model = "bench-chunks{n}"', ""]
    path.write_text("\n".join(lines))


class Procs:
    """The fake (``soak.py fake``) and one gateway worker, started in a temp dir, stopped on exit."""

    def __init__(
        self,
        fake_args: list[str],
        upstream: str,
        routes: dict[str, int],
        max_connections: int | None,
        keep: bool,
        gateway_port: int = 0,
        fake_port: int = 0,
        keepalive_seconds: float | None = None,
    ) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="gateway-soak-"))
        self.fake_port = fake_port or free_port()
        self.gw_port = gateway_port or free_port()
        self.cfg = self.tmp / "gateway.toml"
        write_config(self.cfg, self.gw_port, self.fake_port, upstream, routes, max_connections, keepalive_seconds)
        self.fake_args, self.keep = fake_args, keep
        self.fake_log, self.gw_log = self.tmp / "fake.log", self.tmp / "gateway.log"
        self.fake: subprocess.Popen | None = None
        self.gw: subprocess.Popen | None = None

    def __enter__(self) -> Procs:
        try:
            self.fake = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "fake", "--port", str(self.fake_port), *self.fake_args],
                stdout=self.fake_log.open("w"),
                stderr=subprocess.STDOUT,
            )
            wait_http(f"http://127.0.0.1:{self.fake_port}/healthz", self.fake, 10, "the fake upstream", self.fake_log)
            env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
            env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            cmd = [gateway_python(), "-m", "gateway", "serve", "--config", str(self.cfg), "--port", str(self.gw_port)]
            print(
                f"starting gateway: {' '.join(cmd)} (cwd {self.tmp}, RLIMIT_NOFILE {resource.getrlimit(resource.RLIMIT_NOFILE)})",
                file=sys.stderr,
            )
            self.gw = subprocess.Popen(
                cmd, cwd=self.tmp, env=env, stdout=self.gw_log.open("w"), stderr=subprocess.STDOUT
            )
            wait_http(f"http://127.0.0.1:{self.gw_port}/healthz", self.gw, 30, "the gateway", self.gw_log)
        except BaseException:
            self.keep = True
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self.gw)
        stop(self.fake)
        if self.keep:
            print(f"(config and logs kept in {self.tmp})", file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def gateway_log_tail(self, n: int = 30) -> str:
        return _log_tail(self.gw_log, n)


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


# ---------------------------------------------------------------------------------------------
# the soak


async def soak(args: argparse.Namespace, procs: Procs, tracker: Tracker) -> dict:
    gw_pid = procs.gw.pid  # type: ignore[union-attr]
    url = f"http://127.0.0.1:{procs.gw_port}"
    # warm-up: connection pools, lazy imports (short paced streams, not counted)
    warm = await loadgen.run_load(url, args.caller, "soak-warm", concurrency=20, requests=40, chunks=3, timeout=30)
    if warm.errors:
        raise BenchError(f"warm-up streams failed: {warm.error_samples}")
    await asyncio.sleep(2)
    idle_before = proc_status(gw_pid)
    req = loadgen.build_request(args.caller, "soak")
    host, port = "127.0.0.1", procs.gw_port
    sampler = Sampler(gw_pid, tracker, 1.0, max_samples=int(args.duration + args.timeout + 60))
    cpu0, self0 = proc_cpu(gw_pid), os.times()
    sampler.start()
    t_start = time.monotonic()
    deadline = t_start + args.duration

    async def worker() -> None:
        conn = TapConn(host, port)
        try:
            while time.monotonic() < deadline:
                await one_stream(conn, tracker, args.caller, req, args.chunks, args.timeout)
        finally:
            await conn.close()

    tasks = [asyncio.ensure_future(worker()) for _ in range(args.concurrency)]
    await asyncio.sleep(max(0.0, deadline - time.monotonic()))
    cpu_at_deadline = proc_cpu(gw_pid)
    t_deadline = time.monotonic()
    _done, pending = await asyncio.wait(tasks, timeout=args.timeout + 30)
    for t in pending:
        t.cancel()
    t_end = time.monotonic()
    cpu1, self1 = proc_cpu(gw_pid), os.times()
    sampler.stop()
    await asyncio.sleep(5)
    idle_after = proc_status(gw_pid)
    return {
        "idle_before": idle_before,
        "idle_after_5s": idle_after,
        "samples": sampler.rows,
        "t_load": t_deadline - t_start,
        "t_drain": t_end - t_deadline,
        "cpu_load_window_s": cpu_at_deadline - cpu0,
        "cpu_total_s": cpu1 - cpu0,
        "loadgen_cpu_s": (self1.user + self1.system) - (self0.user + self0.system),
        "unfinished_workers": len(pending),
        "wall_t0": time.time() - (time.monotonic() - t_start),
    }


def summarize(
    args: argparse.Namespace,
    res: dict,
    tracker: Tracker,
    fake_rows: list[dict],
    nofile: tuple[int, int],
    gw_nofile: str,
) -> dict:
    rows = [r for r in res["samples"] if r["rss_kb"] > 0]
    # the t = 0 sample is taken as the workers start (an idle reading): the first window starts at 1 s
    first = [r["rss_kb"] for r in rows if 0.5 <= r["t"] < args.window]
    last = [r["rss_kb"] for r in rows if args.duration - args.window <= r["t"] < args.duration]
    in_load = [r for r in rows if r["t"] < args.duration]
    rss_first, rss_last = mean(first) / 1024, mean(last) / 1024
    change = (rss_last - rss_first) / rss_first * 100 if rss_first else float("nan")
    w0 = res["wall_t0"]
    fake_in = [
        r for r in fake_rows if w0 + args.window <= r["t"] < w0 + args.duration
    ]  # after the ramp, before the drain
    open_in = [r["open"] for r in in_load if r["t"] >= args.window]
    total = tracker.verified + tracker.errors
    s = {
        "caller": args.caller,
        "upstream": args.upstream,
        "concurrency": args.concurrency,
        "duration_s": args.duration,
        "chunks": args.chunks,
        "interval_s": [args.interval_min, args.interval_max],
        "cpus": os.cpu_count(),
        "nofile_load": list(nofile),
        "nofile_gateway": gw_nofile,
        "verified": tracker.verified,
        "errors": tracker.errors,
        "error_samples": tracker.error_samples,
        "streams_per_s": round(tracker.verified / (res["t_load"] + res["t_drain"]), 1),
        "drain_s": round(res["t_drain"], 1),
        "ttfb_p50_ms": round(1000 * sorted(tracker.ttfb)[len(tracker.ttfb) // 2], 1) if tracker.ttfb else None,
        "ttfb_p99_ms": round(1000 * sorted(tracker.ttfb)[int(len(tracker.ttfb) * 0.99)], 1) if tracker.ttfb else None,
        "rss_idle_before_mb": round(res["idle_before"].get("VmRSS", 0) / 1024, 1),
        "rss_first_window_mb": round(rss_first, 1),
        "rss_last_window_mb": round(rss_last, 1),
        "rss_change_pct": round(change, 2),
        "rss_min_mb": round(min(r["rss_kb"] for r in in_load) / 1024, 1) if in_load else None,
        "rss_max_mb": round(max(r["rss_kb"] for r in in_load) / 1024, 1) if in_load else None,
        "rss_idle_after_mb": round(res["idle_after_5s"].get("VmRSS", 0) / 1024, 1),
        "rss_hwm_mb": round(res["idle_after_5s"].get("VmHWM", 0) / 1024, 1),
        "open_streams_min": min(open_in) if open_in else None,
        "open_streams_mean": round(mean(open_in), 1) if open_in else None,
        "fake_active_min": min((r["active"] for r in fake_in), default=None),
        "fake_active_mean": round(mean([r["active"] for r in fake_in]), 1) if fake_in else None,
        "fds_max": max((r["fds"] for r in rows), default=None),
        "gateway_cpu_pct_of_core": round(100 * res["cpu_load_window_s"] / res["t_load"], 1),
        "gateway_cpu_ms_per_stream": round(1000 * res["cpu_total_s"] / total, 2) if total else None,
        "loadgen_cpu_pct_of_core": round(100 * res["loadgen_cpu_s"] / (res["t_load"] + res["t_drain"]), 1),
        "upstream_requests": fake_rows[-1]["requests"] if fake_rows else None,
        "upstream_connections": fake_rows[-1]["connections"] if fake_rows else None,
    }
    s["pass"] = bool(tracker.errors == 0 and tracker.verified > 0 and abs(change) <= args.max_rss_change)
    return s


def print_report(s: dict, samples: list[dict]) -> None:
    print(
        f"\nSoak: {s['concurrency']} concurrent {s['caller']} -> {s['upstream']} streams for {s['duration_s']:g} s through one gateway worker "
        f"({s['chunks']} chunks/stream, {s['interval_s'][0]:g}-{s['interval_s'][1]:g} s between upstream events), {s['cpus']} CPUs, "
        f"RLIMIT_NOFILE load {s['nofile_load'][0]}/{s['nofile_load'][1]}, gateway {s['nofile_gateway']}\n"
    )
    print(
        "| streams verified | errors | streams/s | open streams (min / mean, after 10 s) | upstream replies in flight (min / mean) | "
        "RSS first 10 s MB | RSS last 10 s MB | change | RSS idle before / after MB | gateway CPU % of a core | CPU ms/stream | max FDs |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {s['verified']} | {s['errors']} | {s['streams_per_s']} | {s['open_streams_min']} / {s['open_streams_mean']} | "
        f"{s['fake_active_min']} / {s['fake_active_mean']} | {s['rss_first_window_mb']} | {s['rss_last_window_mb']} | {s['rss_change_pct']:+.2f} % | "
        f"{s['rss_idle_before_mb']} / {s['rss_idle_after_mb']} | {s['gateway_cpu_pct_of_core']} | {s['gateway_cpu_ms_per_stream']} | {s['fds_max']} |"
    )
    print(
        "\nRSS (MB) / open streams every 5 s: "
        + ", ".join(f"{r['t']:.0f}s {r['rss_kb'] / 1024:.1f}/{r['open']}" for r in samples[::5])
    )
    for reason, count in s["error_samples"].items():
        print(f"  {count} x {reason}")
    print(
        f"\n{'PASS' if s['pass'] else 'FAIL'}: errors {s['errors']}, RSS change {s['rss_change_pct']:+.2f} %, drain after the deadline {s['drain_s']} s"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Bounded soak test of one gateway worker (see bench/README.md).")
    ap.add_argument("-c", "--concurrency", type=int, default=1000)
    ap.add_argument(
        "-d", "--duration", type=float, default=60.0, help="seconds of load (new streams start until then; default 60)"
    )
    ap.add_argument(
        "--window", type=float, default=10.0, help="RSS is compared between the first and the last WINDOW seconds"
    )
    ap.add_argument("--max-rss-change", type=float, default=10.0, help="percent")
    ap.add_argument("--caller", default="anthropic", choices=loadgen.DIALECTS)
    ap.add_argument("--upstream", default="openai-chat", choices=loadgen.DIALECTS)
    ap.add_argument("--chunks", type=int, default=50)
    ap.add_argument(
        "--interval-min", type=float, default=0.1, help="seconds between upstream events (drawn per stream)"
    )
    ap.add_argument("--interval-max", type=float, default=0.5)
    ap.add_argument("--timeout", type=float, default=120.0, help="per-stream timeout; also bounds the drain")
    ap.add_argument(
        "--max-connections", type=int, default=None, help="provider max_connections (default: the gateway's default)"
    )
    ap.add_argument(
        "--transport",
        choices=["gateway", "httpx"],
        default=None,
        help="the provider's upstream transport (default: the gateway's)",
    )
    ap.add_argument(
        "--nofile", type=int, default=65536, help="RLIMIT_NOFILE for this process, the fake and the gateway"
    )
    ap.add_argument("--gateway-port", type=int, default=0)
    ap.add_argument("--fake-port", type=int, default=0)
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (config, logs)")
    args = ap.parse_args(argv)
    if args.transport:
        os.environ["BENCH_TRANSPORT"] = args.transport  # read by write_config
    if args.duration > 600 or args.concurrency > 20000:
        ap.error("bounded: at most 600 s and 20000 streams")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["fake"]:
        return fake_main(argv[1:])
    args = parse_args(argv)
    nofile = raise_nofile(args.nofile)
    fake_args = [
        "--mode",
        "paced",
        "--chunks",
        str(args.chunks),
        "--interval-min",
        str(args.interval_min),
        "--interval-max",
        str(args.interval_max),
        "--nofile",
        str(args.nofile),
    ]
    tracker = Tracker()
    try:
        with Procs(
            fake_args,
            args.upstream,
            {"soak": args.chunks, "soak-warm": 3},
            args.max_connections,
            args.keep,
            args.gateway_port,
            args.fake_port,
        ) as procs:
            gw_nofile = proc_nofile(procs.gw.pid)  # type: ignore[union-attr]
            loop = loadgen.new_loop()
            try:
                res = loop.run_until_complete(
                    asyncio.wait_for(soak(args, procs, tracker), args.duration + 2 * args.timeout + 120)
                )
            finally:
                loop.close()
            if procs.gw.poll() is not None:  # type: ignore[union-attr]
                print("ERROR: the gateway exited during the soak" + procs.gateway_log_tail(), file=sys.stderr)
                procs.keep = True
            fake_rows = read_fake_stats(procs.fake_log)
            s = summarize(args, res, tracker, fake_rows, nofile, gw_nofile)
            print_report(s, res["samples"])
            if args.json_out:
                Path(args.json_out).write_text(
                    json.dumps({"summary": s, "samples": res["samples"], "fake": fake_rows}, indent=1, default=str)
                )
            if not s["pass"]:
                procs.keep = True
                print(procs.gateway_log_tail(), file=sys.stderr)
            return 0 if s["pass"] else 1
    except BenchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
