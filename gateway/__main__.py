"""Command line: ``python -m gateway serve [--config PATH] [--host H] [--port P] [--workers N]`` and
``python -m gateway check-config PATH``."""

from __future__ import annotations

import argparse
import logging
import os
import sys

log = logging.getLogger("gateway")

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gateway.server.open_files import raise_open_files

    raise_open_files()  # logged: what this process (and its workers) may open

    from gateway.settings import load_settings

    if args.config:
        os.environ["GATEWAY_CONFIG"] = args.config
    settings = load_settings(args.config)
    from gateway.platforms import ConfigError, check_platforms

    try:
        check_platforms(settings)  # a platform's missing extra fails here, naming it, not at the first request
    except ConfigError as exc:
        print(f"invalid config: {exc}", file=sys.stderr)
        return 2
    host = args.host or settings.server.host
    port = args.port or settings.server.port
    workers = args.workers or settings.server.workers
    keys = settings.auth.resolved_keys() or [k.name for k in settings.keys]
    if not keys and host not in LOOPBACK:
        if not settings.server.allow_open:
            print(
                f"refusing to serve on {host} without caller keys: set {settings.auth.keys_env} "
                "or server.allow_open = true in the config",
                file=sys.stderr,
            )
            return 2
        log.warning(
            "!!! OPEN ACCESS: serving on %s with no caller keys: anyone who can reach it spends your provider keys",
            host,
        )
    # Workers re-import the app from the environment, so pass the resolved settings down that way.
    os.environ["GATEWAY_SERVER__HOST"] = host
    os.environ["GATEWAY_SERVER__PORT"] = str(port)
    from gateway.server.protocol import uvicorn_options

    common = dict(
        **uvicorn_options(),  # head/body deadlines, connection cap, the Responses WebSocket protocol
        host=host,
        port=port,
        log_level="info",
        access_log=False,
        timeout_graceful_shutdown=settings.server.shutdown_grace_seconds,
        loop="auto",
        lifespan="on",
    )
    if workers > 1:
        from gateway.server.workers import serve_workers

        # each worker binds its own SO_REUSEPORT socket: the kernel spreads the connections evenly
        return serve_workers(workers, host, port, {k: v for k, v in common.items() if k not in ("host", "port")})
    from gateway.server.serve import GracefulServer, app_from_env

    config = uvicorn.Config(app_from_env(), **common)
    server = GracefulServer(config)
    server.run()  # picks uvloop when installed (loop="auto")
    return 0


def _check_config(args: argparse.Namespace) -> int:
    from gateway.routing.router import Router
    from gateway.settings import load_settings

    try:
        settings = load_settings(args.path)
    except Exception as exc:  # pydantic ValidationError, TOML errors, missing references
        print(f"invalid config {args.path}: {exc}", file=sys.stderr)
        return 1
    from gateway.http import demo
    from gateway.platforms import ConfigError, check_platforms, platform_for

    try:
        check_platforms(settings)
    except ConfigError as exc:
        print(f"invalid config {args.path}: {exc}", file=sys.stderr)
        return 1
    router = Router(settings)
    print(f"config OK: {len(settings.providers)} providers, {len(settings.routes)} routes")
    for p in settings.providers:
        if p.transport == demo.KIND:
            print(f"  provider {p.name}: demo (no key needed)")
            continue
        platform = platform_for(p)
        where = p.dialect if p.platform is None else f"{p.dialect} on {p.platform}"
        # where the credentials come from, never their value
        print(f"  provider {p.name}: {where} {platform.base_url(p)} (credentials: {platform.credential_source(p)})")
    for r in settings.routes:
        if r.provider is not None:
            chain = " -> ".join([f"{r.provider}:{r.upstream_model or '<same name>'}", *r.fallbacks])
        else:
            pool = ", ".join(f"{t.provider}:{t.upstream_model or '<same name>'}" for t in r.targets)
            chain = " -> ".join([f"{r.strategy}[{pool}]", *r.fallbacks])
        print(f"  route {r.model}: {chain}")
    for name in args.model or []:
        try:
            resolved = router.resolve(name)
        except Exception as exc:
            print(f"  {name}: {exc}")
            continue
        if not resolved.balanced:
            print(
                f"  {name} resolves via {resolved.route!r} to "
                + " -> ".join(f"{t.provider}:{t.upstream_model}" for t in resolved.targets)
            )
            continue
        print(
            f"  {name} resolves via {resolved.route!r}: strategy {resolved.strategy}, affinity {resolved.affinity}, cooldown {resolved.cooldown:g}s"
        )
        balanced = resolved.targets[: resolved.pool]
        total = sum(t.weight for t in balanced) or 1.0
        for t in balanced:
            limits = "".join(f", {k} {v}" for k, v in (("rpm", t.rpm), ("tpm", t.tpm)) if v is not None)
            share = f" ({t.weight / total:.0%} of traffic)" if resolved.strategy == "weighted" else ""
            print(f"    target {t.provider}:{t.upstream_model} weight {t.weight:g}{share}{limits}")
        for t in resolved.targets[resolved.pool :]:
            print(f"    fallback {t.provider}:{t.upstream_model}")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="gateway", description="LLM API gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the server")
    serve.add_argument("--config")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int)
    check = sub.add_parser("check-config", help="validate a config and print the resolved routes")
    check.add_argument("path")
    check.add_argument("--model", action="append", help="also show where this model name resolves (repeatable)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    return _check_config(args)


if __name__ == "__main__":
    sys.exit(main())
