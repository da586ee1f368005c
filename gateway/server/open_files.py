"""Raising the open-files limit at startup: each relayed stream holds two sockets (the caller's and
the upstream's), so 10,000 open streams need some 20,000 descriptors, and distributions start
processes with a soft limit of 1,024. The soft limit is a process's own to raise up to the hard one
(no privilege needed), so the gateway does that itself and logs what it has; a hard limit set low
is the operator's to raise (``ulimit -Hn``, systemd ``LimitNOFILE=``, the container runtime)."""

from __future__ import annotations

import logging

log = logging.getLogger("gateway")

NR_OPEN = "/proc/sys/fs/nr_open"  # Linux: the most a process may ask for when the hard limit is unlimited
FALLBACK_CEILING = 1 << 20


def _ceiling() -> int:
    try:
        with open(NR_OPEN) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return FALLBACK_CEILING


def raise_open_files() -> tuple[int, int] | None:
    """Take the soft RLIMIT_NOFILE up to the hard limit; return (soft, hard) after, None where the
    platform has no such limit. Logged either way, so the figure a deployment runs with is known."""
    try:
        import resource
    except ImportError:  # not a POSIX platform
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, _ceiling()) if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError) as exc:
            log.warning("open files: could not raise the soft limit %d to %d (%s)", soft, wanted, exc)
            return soft, hard
        log.info("open files: soft limit raised from %d to %d (the hard limit)", soft, wanted)
        return wanted, hard
    log.info("open files: soft limit %d, hard limit %s", soft, "unlimited" if hard == resource.RLIM_INFINITY else hard)
    return soft, hard
