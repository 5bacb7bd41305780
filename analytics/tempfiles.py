"""Temporary files and folders that name the process that made them, so what a killed process
left behind is found and removed at the next start.

Every temporary headroom writes (a browser upload on its way to disk, a UTF-8 copy of a UTF-16
file, an envelope-cache or advisor entry being written) is named ``<prefix><pid>-<random>``
by :func:`prefix`. :func:`sweep` removes the entries of a folder whose process is gone (or that
are older than :data:`STALE_S`, whatever their process): the app's server calls it for its
folders when it starts (:mod:`analytics.ui.startup`), the CLI's ingest for the system
temporary folder. A SIGKILL, an OOM kill or a power cut runs no ``finally``: before this, the
upload folder and the envelope cache's temporaries kept such files forever.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

#: Age (seconds) past which a temporary is removed even when a process of its PID is alive
#: (the PID may have been reused; no temporary lives this long: upload tokens expire in 1 h).
STALE_S = 6 * 3600.0

_PID = re.compile(r"-(\d+)-")


def prefix(kind: str) -> str:
    """``"<kind>-<pid>-"``: the name prefix of a temporary of this process (``kind`` like
    ``"upload"``, ``".envelope"``)."""
    return f"{kind}-{os.getpid()}-"


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (this user's or another's)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner(name: str, kind: str) -> int | None:
    match = _PID.match(name[len(kind):])
    return int(match.group(1)) if match else None


def sweep(folder: Path | str, kinds: tuple[str, ...], stale_s: float = STALE_S) -> int:
    """Remove the entries of ``folder`` whose name starts with one of ``kinds`` and whose
    process is gone, or which are older than ``stale_s`` seconds (names without a PID: by age
    only); returns how many were removed. This process's own are kept; a missing folder is
    fine; an entry that cannot be removed is skipped."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    now, removed, me = time.time(), 0, os.getpid()
    for path in folder.iterdir():
        kind = next((k for k in kinds if path.name.startswith(k)), None)
        if kind is None:
            continue
        owner = _owner(path.name, kind)
        try:
            old = now - path.lstat().st_mtime > stale_s
        except OSError:
            continue
        if owner == me or not (old or (owner is not None and not alive(owner))):
            continue
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed += 1
        except OSError:
            continue
    return removed


def mkstemp(kind: str, suffix: str = "", folder: Path | str | None = None) -> tuple[int, str]:
    """:func:`tempfile.mkstemp` with this process's :func:`prefix` (in the system temporary
    folder unless ``folder``)."""
    return tempfile.mkstemp(suffix=suffix, prefix=prefix(kind), dir=folder)


def mkdtemp(kind: str, folder: Path | str) -> Path:
    """:func:`tempfile.mkdtemp` with this process's :func:`prefix` in ``folder``."""
    return Path(tempfile.mkdtemp(prefix=prefix(kind), dir=folder))


#: Name prefix of an envelope-cache entry being written (``<store>-cache/envelope/``).
ENVELOPE_KIND = ".tmp-envelope"
#: Name prefix of an advisor entry being written (``<store>-cache/advisor/``).
ADVISOR_KIND = ".tmp-advisor"
#: Kinds of the temporaries headroom leaves in the system temporary folder.
SYSTEM_KINDS = ("headroom-utf8", "headroom-nobom", "headroom-noindex")


def sweep_system() -> int:
    """:func:`sweep` of the system temporary folder's headroom temporaries."""
    return sweep(tempfile.gettempdir(), SYSTEM_KINDS)
