"""The live road's record (issue 29; tables ``live_runs`` and ``live_bins``, migration 16).

A *live run* is one model followed on one source with one envelope configuration: its name,
the configuration (JSON: model, engine, history dataset, bin width, alpha, point model,
k_above, weights), the first live bin and when it was started. Each closed bin is a
``live_bins`` row: the demand (None in a gap, with the reason), the band it was judged
against, the ACI step, the alarm, the coverage so far: every update is kept, so the coverage
the page and ``headroom live`` show is a measured number; with the GPUs named, each bin's
energy (J), J/token and gCO2/token too. Bins are written once per poll in
one transaction; a bin already stored is kept as it was (a resumed follower re-reads what it
missed, never rewrites). Live bins are not data: writing them does not move the data version
(the pages' caches of datasets stay valid); the Live page keys on :func:`live_stamp`.
"""

from __future__ import annotations

import json

from analytics.store.core import _now, _run, transaction

#: The columns of a stored bin, in table order after ``name`` and ``ts``.
BIN_COLUMNS = ("demand", "prompt_tokens", "completion_tokens", "point", "lower", "upper",
               "alpha_t", "covered", "above", "alarm", "alarm_reason", "coverage_so_far",
               "gap_reason", "samples", "resets", "martingale", "energy_j", "j_per_token",
               "j_per_output_token", "gco2_per_kwh", "gco2_per_token", "energy_gap_reason",
               "refit")


def live_run(con, name: str) -> dict | None:
    """The stored run ``name``: ``{"name", "config" (dict), "first_ts", "started_at", "bins",
    "last_ts", "alarms", "gaps"}`` (bins with the alarm up, bins of unknown demand), or
    None."""
    with con.cursor() as cur:
        row = _run(cur, "SELECT r.name, r.config, r.first_ts, r.started_at, count(b.ts), "
                        "max(b.ts), count(*) FILTER (WHERE b.alarm), "
                        "count(b.ts) FILTER (WHERE b.demand IS NULL) FROM live_runs r "
                        "LEFT JOIN live_bins b USING (name) WHERE r.name = ? "
                        "GROUP BY ALL", [name]).fetchone()
    if row is None:
        return None
    return {"name": row[0], "config": json.loads(row[1]), "first_ts": row[2],
            "started_at": row[3], "bins": int(row[4]), "last_ts": row[5], "alarms": int(row[6]),
            "gaps": int(row[7])}


def live_runs(con) -> list[dict]:
    """Every stored run, newest first (:func:`live_run`'s fields)."""
    with con.cursor() as cur:
        names = [r[0] for r in _run(cur, "SELECT name FROM live_runs ORDER BY started_at DESC, "
                                          "name").fetchall()]
    return [live_run(con, n) for n in names]


def start_live_run(con, name: str, config: dict, first_ts) -> None:
    """Record a new run (one transaction). Raises ValueError when ``name`` is stored with
    another configuration (the message names what differs)."""
    with con.cursor() as c, transaction(c) as cur:
        row = _run(cur, "SELECT config FROM live_runs WHERE name = ?", [name]).fetchone()
        if row is not None:
            stored = json.loads(row[0])
            diff = sorted(k for k in {*stored, *config} if stored.get(k) != config.get(k))
            if diff:
                raise ValueError(f"live run {name!r} was started with other options ("
                                 + ", ".join(f"{k} {stored.get(k)!r}, now {config.get(k)!r}"
                                             for k in diff)
                                 + "): give the same options, or another --run name")
            return
        _run(cur, "INSERT INTO live_runs VALUES (?, ?, ?, ?)",
             [name, json.dumps(config, sort_keys=True, allow_nan=False), first_ts, _now()])


def save_live_bins(con, name: str, records: list[dict]) -> int:
    """Store closed bins of run ``name`` (one transaction; a bin already stored is kept as it
    was). ``records`` are :meth:`analytics.live.envelope.LiveBin.as_dict` dicts with
    ``prompt_tokens``, ``completion_tokens``, ``samples`` and ``resets``. Returns the rows
    added."""
    rows = [[name, r["ts"], *(r.get(c) for c in BIN_COLUMNS), _now()] for r in records]
    if not rows:
        return 0
    marks = ", ".join("?" for _ in range(len(BIN_COLUMNS) + 3))
    stamps = [r[1] for r in rows]
    with con.cursor() as c, transaction(c) as cur:
        # the bins already stored, over the incoming span only (the primary key's range)
        kept = _run(cur, "SELECT count(*) FROM live_bins WHERE name = ? AND ts BETWEEN "
                         "?::TIMESTAMP AND ?::TIMESTAMP", [name, min(stamps), max(stamps)]
                    ).fetchone()[0]
        cur.executemany(f"INSERT INTO live_bins VALUES ({marks}) ON CONFLICT DO NOTHING", rows)
    return len(rows) - int(kept)


def live_bins(con, name: str, since=None, limit: int | None = None):
    """The stored bins of run ``name`` in time order (the last ``limit`` when given; those
    from ``since`` on), as a pandas DataFrame of ``ts``, :data:`BIN_COLUMNS` and
    ``closed_at`` (when headroom closed the bin, UTC)."""
    where, args = "name = ?", [name]
    if since is not None:
        where += " AND ts >= ?"
        args.append(since)
    cols = ", ".join(("ts", *BIN_COLUMNS, "closed_at"))
    sql = f"SELECT {cols} FROM live_bins WHERE {where} ORDER BY ts"
    if limit is not None:
        sql = (f"SELECT * FROM (SELECT {cols} FROM live_bins WHERE {where} ORDER BY ts DESC "
               f"LIMIT {int(limit)}) ORDER BY ts")
    with con.cursor() as cur:
        return _run(cur, sql, args).df()


def live_stamp(con, name: str) -> tuple:
    """``(bins, last ts)`` of run ``name``: what a cached view of its bins keys on."""
    with con.cursor() as cur:
        row = _run(cur, "SELECT count(*), max(ts) FROM live_bins WHERE name = ?",
                   [name]).fetchone()
    return int(row[0]), row[1]
