"""The store key of a sweep task: (analysis, params_sha256, seed, code_version, inputs_sha256).

A task's result depends on its function's code, its parameters, its seed and the data it is
given; each part is hashed so that a change to any of them is a new key (the result is then
computed, not read). Hashes are sha256 (hex) of canonical JSON (sorted keys, no NaN).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from analytics.sweep.worker import jsonable

#: Libraries whose version is part of every code version (numerics may change with them).
_LIBS = ("numpy", "pandas", "scipy")


def canonical(value) -> str:
    """Canonical JSON of ``value`` (sorted keys, compact, strict: no NaN)."""
    return json.dumps(jsonable(value), sort_keys=True, separators=(",", ":"), allow_nan=False)


def sha256_of(value) -> str:
    """sha256 (hex) of :func:`canonical` ``value``."""
    return hashlib.sha256(canonical(value).encode()).hexdigest()


@functools.cache
def code_version(fn: str) -> str:
    """sha256 (hex) over the sources of the package that holds ``fn`` (``"pkg.module:function"``:
    every ``*.py`` file of ``pkg``'s folder, so a change to the engine behind a task is a new
    version), this module and the versions of numpy, pandas and scipy.

    Raises
    ------
    ValueError / ImportError
        ``fn`` does not name an importable module.
    """
    import importlib

    module = importlib.import_module(fn.partition(":")[0])
    folder = Path(module.__file__).resolve().parent
    from analytics.ingest.digest import code_digest

    return code_digest([*sorted(folder.glob("*.py")), Path(__file__)], _LIBS)
