"""Named scenarios: a page's parameters saved under a name (issue 19 item 13).

A scenario is the JSON of the parameters a page computes its result from (the same keys a
share link carries, :mod:`analytics.ui.scenario`). Saving one is not a data change: the data
version does not move, and no cached result is invalidated.
"""

from __future__ import annotations

import json

from analytics.store.core import _now, _run, transaction

#: Longest scenario name kept (characters).
MAX_SCENARIO_NAME = 80


def save_scenario(con, name: str, page: str, params: dict) -> str:
    """Save (or overwrite) scenario ``name`` of ``page`` with ``params``; returns the name as
    stored (stripped).

    Raises:
        ValueError: an empty name, one longer than :data:`MAX_SCENARIO_NAME` characters, or
            parameters that are not JSON (no NaN or Infinity).
    """
    name = name.strip()
    if not name or len(name) > MAX_SCENARIO_NAME or not name.isprintable():
        raise ValueError(f"a scenario name needs 1 to {MAX_SCENARIO_NAME} printable characters")
    body = json.dumps(params, sort_keys=True, allow_nan=False)
    with con.cursor() as c, transaction(c) as cur:
        _run(cur, "DELETE FROM scenarios WHERE name = ?", [name])
        _run(cur, "INSERT INTO scenarios VALUES (?, ?, ?, ?)", [name, page, body, _now()])
    return name


def scenarios(con, page: str | None = None) -> list[dict]:
    """Saved scenarios (of ``page`` only, when given), newest first: dicts with ``name``,
    ``page``, ``params`` (a dict) and ``saved_at`` (ISO 8601, UTC)."""
    where, args = ("WHERE page = ?", [page]) if page else ("", [])
    with con.cursor() as cur:
        rows = _run(cur, f"SELECT name, page, params, saved_at FROM scenarios {where} "
                         "ORDER BY saved_at DESC, name", args).fetchall()
    return [{"name": n, "page": p, "params": json.loads(js), "saved_at": t.isoformat()}
            for n, p, js, t in rows]


def delete_scenario(con, name: str) -> bool:
    """Delete scenario ``name``; True when it existed."""
    with con.cursor() as c, transaction(c) as cur:
        found = _run(cur, "SELECT count(*) FROM scenarios WHERE name = ?", [name]).fetchone()[0]
        _run(cur, "DELETE FROM scenarios WHERE name = ?", [name])
    return bool(found)
