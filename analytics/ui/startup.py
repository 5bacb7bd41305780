"""What the app's server does once when it starts (``serve.py``): remove what a killed server
left behind, give itself room for connections, and keep a flood of one message out of its log.

* Leftovers (:mod:`analytics.tempfiles`): upload files of a server process that is gone, the
  envelope cache's and the advisor's half-written entries, the ingest's UTF-8 / no-index copies
  in the system temporary folder.
* File descriptors: the soft limit is raised to the hard one (at most :data:`MAX_FDS`), so slow
  clients exhaust it later; the upload route also bounds and times out its bodies.
* The log: when the server runs out of a resource, asyncio and uvicorn log the same line per
  accept attempt (97 MB in 90 s under a slow-body flood). :class:`RateLimit` passes each
  distinct message at most once per :data:`RATE_WINDOW_S` seconds and then says how many it held
  back.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from analytics import tempfiles
from analytics.config import Settings

log = logging.getLogger("headroom")

#: Most file descriptors the server asks for.
MAX_FDS = 65536
#: Seconds within which a repeated log message is held back.
RATE_WINDOW_S = 10.0


class RateLimit(logging.Filter):
    """A logging filter: the same (logger, level, message template) passes at most once per
    ``window_s`` seconds; the next one that passes says how many were held back. Remembers at
    most 1,000 templates."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        super().__init__()
        self.window_s = window_s
        self._seen: dict[tuple, list] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg)[:200])
        now = time.monotonic()
        entry = self._seen.get(key)
        if entry is not None and now - entry[0] < self.window_s:
            entry[1] += 1
            return False
        if entry is not None and entry[1]:
            record.msg = f"{record.msg} [{entry[1]} more like this in the last " \
                         f"{now - entry[0]:.0f} s held back]"
        if len(self._seen) >= 1000:
            self._seen.clear()
        self._seen[key] = [now, 0]
        return True


def limit_log_rate(window_s: float = RATE_WINDOW_S) -> RateLimit:
    """Put one :class:`RateLimit` on the root logger's handlers and on the loggers that
    repeat themselves under resource exhaustion (``asyncio``, ``uvicorn.error``); idempotent."""
    found = None
    handlers = list(logging.getLogger().handlers)
    for name in ("asyncio", "uvicorn.error", "uvicorn", "streamlit"):
        handlers += logging.getLogger(name).handlers
    targets = [*handlers, *(logging.getLogger(n) for n in ("asyncio", "uvicorn.error"))]
    for target in targets:
        found = next((f for f in target.filters if isinstance(f, RateLimit)), found)
    limit = found or RateLimit(window_s)
    for target in targets:
        if limit not in target.filters:
            target.addFilter(limit)
    return limit


def raise_fd_limit(most: int = MAX_FDS) -> int | None:
    """Raise this process's soft limit on open files to its hard limit (at most ``most``);
    returns the limit now in force, or None where the platform has none."""
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = most if hard == resource.RLIM_INFINITY else min(hard, most)
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return soft


def clean_leftovers(settings: Settings | None = None) -> dict[str, int]:
    """Remove what killed processes left: ``{"uploads", "envelope", "advisor", "system"}``
    counts (see :func:`analytics.tempfiles.sweep`)."""
    settings = settings or Settings.from_env()
    cache = Path(settings.cache_dir)
    return {"uploads": tempfiles.sweep(settings.upload_dir, ("upload",)),
            "envelope": tempfiles.sweep(cache / "envelope", (tempfiles.ENVELOPE_KIND,)),
            "advisor": tempfiles.sweep(cache / "advisor", (tempfiles.ADVISOR_KIND, "."),
                                       stale_s=3600),
            "system": tempfiles.sweep_system()}


def on_server_start() -> None:
    """Everything above, once, logged."""
    limit_log_rate()
    fds = raise_fd_limit()
    removed = clean_leftovers()
    if any(removed.values()):
        log.info("removed what a stopped server left: %s", removed)
    log.debug("open-file limit %s", fds)
