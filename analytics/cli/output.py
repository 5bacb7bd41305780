"""The ONE place the ``headroom`` command writes its JSON: strict JSON only.

Python's ``json`` writes ``NaN`` and ``Infinity`` by default, which strict parsers reject and
``jq`` turns into 1.797e308. :func:`dumps` converts numpy scalars to Python numbers, replaces any
non-finite number left in a document by null (recording its path and why under
``null_reasons`` when the document is an object) and then writes with ``allow_nan=False``, so
a NaN can never reach stdout.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

NOT_FINITE = "not a finite number"


def _strict(value: Any, path: str, reasons: dict[str, str]) -> Any:
    # numpy scalars; a command that never imported numpy (``datasets``) cannot hold one
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        reasons.setdefault(path, f"{NOT_FINITE} ({value})")
        return None
    if isinstance(value, dict):
        return {k: _strict(v, f"{path}.{k}" if path else str(k), reasons)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v, f"{path}[{i}]", reasons) for i, v in enumerate(value)]
    return value


def strict(doc: Any) -> Any:
    """``doc`` with numpy scalars unwrapped and non-finite floats replaced by None; for an object
    document, each replaced path is added to ``null_reasons`` (existing reasons are kept).

    >>> strict({"wape": float("nan"), "rows": [1.0, float("inf")]})
    {'wape': None, 'rows': [1.0, None], 'null_reasons': {'wape': 'not a finite number (nan)', \
'rows[1]': 'not a finite number (inf)'}}
    """
    reasons: dict[str, str] = {}
    out = _strict(doc, "", reasons)
    if isinstance(out, dict) and (reasons or "null_reasons" in out):
        out["null_reasons"] = {**(out.get("null_reasons") or {}), **reasons}
    return out


def dumps(doc: Any) -> str:
    """Strict JSON text of a CLI document (indented; dates and paths as strings).

    Raises ValueError only if a non-finite number slipped through (it cannot: :func:`strict`
    removes them first)."""
    return json.dumps(strict(doc), indent=2, default=str, allow_nan=False)


class JsonLines:
    """A command result printed as JSON Lines (``headroom live``): one compact strict-JSON
    object per line (:func:`dumps_line`), not one indented document, each printed as it comes
    (``rows`` may be a generator that never ends: ``headroom live --follow``)."""

    def __init__(self, rows):
        self.rows = rows

    def __iter__(self):
        return iter(self.rows)


class Text:
    """A command result printed as it is, not as JSON: a file ``headroom plan --emit`` writes
    (a shell command, YAML, a batch script)."""

    def __init__(self, text: str):
        self.text = text


def dumps_line(doc: Any) -> str:
    """One strict-JSON line of a JSON Lines result (no NaN / Infinity: :func:`strict`)."""
    return json.dumps(strict(doc), default=str, allow_nan=False, separators=(",", ":"))
