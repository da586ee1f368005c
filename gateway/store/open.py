"""``open_store(url, ttl)``: the backend named by the ``[store] url`` scheme.

Apart from ``base`` so the interface imports none of its implementations (they import it).
"""

from __future__ import annotations

from gateway.store.base import Store


def open_store(url: str, ttl_seconds: float, *, password: str | None = None) -> Store:
    """Open the backend named by ``url``'s scheme (see ``gateway.store.base``).

    Imports are lazy so the SQLite default never needs the ``redis`` package.
    """
    if ttl_seconds <= 0:
        raise ValueError("store ttl must be positive")
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        from gateway.store.sqlite import SQLiteStore, sqlite_path

        return SQLiteStore(sqlite_path(url), ttl_seconds)
    if scheme in ("redis", "rediss", "unix", "redis+sentinel", "redis+cluster"):
        from gateway.store.redis import RedisStore

        return RedisStore(url, ttl_seconds, password=password)
    raise ValueError(
        f"unsupported [store] url {url!r}: use sqlite:///path.db, redis://host:port/db, "
        "redis+sentinel://host:26379,host2:26379/<master>/<db> or redis+cluster://host:7000,host2:7001"
    )
