"""Stored results of sweep tasks (issue 17; table ``sweep_runs``, migration 12).

One row per task key ``(analysis, params_sha256, seed, code_version, inputs_sha256)`` (see
:mod:`analytics.sweep.keys`) with the parameters and the result as JSON, when it started and
finished (UTC), its CPU and wall seconds and where it ran (``local``, ``serial`` or the Dask
scheduler's address). Sweep results are not data: writing one does not move the data version.
Callers open a short-lived connection per read or write (:func:`analytics.store.connect`) and
hold none while tasks run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from analytics.store.core import _run, transaction

#: Columns of a task key, in primary-key order.
KEY_COLUMNS = ("analysis", "params_sha256", "seed", "code_version", "inputs_sha256")


def sweep_results(con, keys: list[tuple]) -> dict[tuple, dict]:
    """The stored rows of the task ``keys`` that have one.

    Parameters
    ----------
    keys : tuples ``(analysis, params_sha256, seed, code_version, inputs_sha256)``

    Returns
    -------
    dict key -> {"result" (dict), "cpu_s", "wall_s", "ran_on", "started_at", "finished_at"}
    """
    if not keys:
        return {}
    import pandas as pd  # here: `headroom datasets` imports the store without pandas

    frame = pd.DataFrame(list(keys), columns=list(KEY_COLUMNS)).drop_duplicates()
    with con.cursor() as cur:
        cur.register("wanted_keys", frame)
        try:
            rows = _run(cur, "SELECT s.analysis, s.params_sha256, s.seed, s.code_version, "
                             "s.inputs_sha256, s.result, s.cpu_s, s.wall_s, s.ran_on, "
                             "s.started_at, s.finished_at FROM sweep_runs s "
                             "JOIN wanted_keys USING (analysis, params_sha256, seed, code_version, "
                             "inputs_sha256)").fetchall()
        finally:
            cur.unregister("wanted_keys")
    return {tuple(r[:5]): {"result": json.loads(r[5]), "cpu_s": r[6], "wall_s": r[7],
                           "ran_on": r[8], "started_at": r[9], "finished_at": r[10]}
            for r in rows}


def _ts(unix_s: float) -> datetime:
    return datetime.fromtimestamp(unix_s, UTC).replace(tzinfo=None)


def save_sweep_runs(con, records: list[dict]) -> int:
    """Write finished tasks (one transaction; a key already stored is replaced).

    Parameters
    ----------
    records : dicts with the :data:`KEY_COLUMNS`, ``params`` (dict), ``result`` (dict, strict
        JSON), ``started`` / ``finished`` (UNIX s), ``cpu_s``, ``wall_s``, ``ran_on``

    Returns
    -------
    rows written

    Raises
    ------
    ValueError
        A result or parameters that are not strict JSON (NaN, Infinity).
    """
    rows = [[*(r[k] for k in KEY_COLUMNS),
             json.dumps(r["params"], sort_keys=True, allow_nan=False),
             json.dumps(r["result"], sort_keys=True, allow_nan=False),
             _ts(r["started"]), _ts(r["finished"]), float(r["cpu_s"]), float(r["wall_s"]),
             str(r["ran_on"])] for r in records]
    if not rows:
        return 0
    with con.cursor() as c, transaction(c) as cur:
        for row in rows:
            _run(cur, "DELETE FROM sweep_runs WHERE analysis = ? AND params_sha256 = ? AND "
                      "seed = ? AND code_version = ? AND inputs_sha256 = ?", row[:5])
            _run(cur, "INSERT INTO sweep_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    return len(rows)


def sweep_runs(con, analysis: str | None = None):
    """What ran, where and how long: one row per (analysis, code version, inputs, where),
    newest first, with ``tasks``, ``first_started``, ``last_finished`` (UTC), ``cpu_s`` and
    ``wall_s`` (sums over the tasks, s) and ``max_wall_s`` (the longest task, s), as a pandas
    DataFrame."""
    where, args = ("WHERE analysis = ?", [analysis]) if analysis else ("", [])
    with con.cursor() as cur:
        return _run(cur, "SELECT analysis, ran_on, left(code_version, 12) AS code_version, "
                         "left(inputs_sha256, 12) AS inputs_sha256, count(*) AS tasks, "
                         "min(started_at) AS first_started, max(finished_at) AS last_finished, "
                         "sum(cpu_s) AS cpu_s, sum(wall_s) AS wall_s, max(wall_s) AS max_wall_s "
                         f"FROM sweep_runs {where} "
                         "GROUP BY analysis, ran_on, code_version, inputs_sha256 "
                         "ORDER BY last_finished DESC", args).df()


def _match(analysis: str, code_version: str, inputs_sha256: str) -> tuple[str, list]:
    """The WHERE clause of one stored sweep: an analysis, and its code version and inputs by
    the (12-character) prefixes :func:`sweep_runs` shows."""
    return ("analysis = ? AND starts_with(code_version, ?) AND starts_with(inputs_sha256, ?)",
            [analysis, code_version, inputs_sha256])


def sweep_points(con, analysis: str, code_version: str, inputs_sha256: str) -> list[dict]:
    """The stored tasks of one sweep (:func:`sweep_runs` row: analysis, code version and
    inputs prefixes), in start order: ``{"params" (dict), "seed", "result" (dict), "cpu_s",
    "wall_s", "ran_on", "finished_at"}``."""
    where, args = _match(analysis, code_version, inputs_sha256)
    with con.cursor() as cur:
        rows = _run(cur, "SELECT params, seed, result, cpu_s, wall_s, ran_on, finished_at "
                         f"FROM sweep_runs WHERE {where} ORDER BY started_at, params_sha256, "
                         "seed", args).fetchall()
    return [{"params": json.loads(r[0]), "seed": int(r[1]), "result": json.loads(r[2]),
             "cpu_s": r[3], "wall_s": r[4], "ran_on": r[5], "finished_at": r[6]} for r in rows]


def delete_sweep(con, analysis: str, code_version: str, inputs_sha256: str) -> int:
    """Delete one stored sweep's tasks (one transaction); returns how many. A rerun of the same
    sweep then computes them again. Sweep results are not data: the data version stays."""
    where, args = _match(analysis, code_version, inputs_sha256)
    with con.cursor() as c, transaction(c) as cur:
        n = _run(cur, f"SELECT count(*) FROM sweep_runs WHERE {where}", args).fetchone()[0]
        _run(cur, f"DELETE FROM sweep_runs WHERE {where}", args)
    return int(n)
