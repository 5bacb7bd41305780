"""The live road's record (issue 29; tables ``live_runs`` and ``live_bins``, migrations 16 and 19).

A *live run* is one model followed on one source with one envelope configuration: its name,
the configuration (JSON: model, engine, history dataset, bin width, alpha, point model,
k_above, weights), the first live bin and when it was started. Each closed bin is a
``live_bins`` row: the demand (None in a gap, with the reason), the band it was judged
against, the ACI step, the alarm, the coverage so far: every update is kept, so the coverage
the page and ``headroom live`` show is a measured number; with the GPUs named, each bin's
energy (J), J/token and gCO2/token too. Bins are written once per poll in
one transaction; a bin already stored is kept as it was (a resumed follower re-reads what it
missed, never rewrites). The Live page keys on :func:`live_stamp`.

The live series is also a dataset that grows (item 2): in the same transaction, every new bin
of known demand is appended to the run's ``demand_series`` dataset (``live_runs.dataset``,
:func:`series_name`) through the ingest road's append (:func:`analytics.store.writes.
write_items`, :func:`analytics.store.appends.append`: the ledger's rows, span and per-append
provenance follow, the data version moves), so the Demand page, ``headroom envelope`` and a
later run's ``--history`` read the live series like any trace. A bin of unknown demand (a gap
of the source) has no row there: that series' grid reads it as 0 tokens, which the dataset's
warnings say with the count; the run's own bins keep it as a gap. A run stored before schema 19,
or whose dataset was deleted, gets it (re)built from its stored bins at its next save.
"""

from __future__ import annotations

import hashlib
import json
import math
import re

from analytics.store.core import _now, _run, transaction

#: The serving stats of a bin (:data:`analytics.live.serving_stats.COLUMNS`; migration 20).
SERVING_COLUMNS = ("requests", "running_mean", "waiting_mean", "kv_cache_mean", "kv_cache_max",
                   "ttft_p50_s", "ttft_p95_s", "itl_p50_s", "itl_p95_s", "e2e_p50_s",
                   "e2e_p95_s")

#: The columns of a stored bin, in table order after ``name`` and ``ts``.
BIN_COLUMNS = ("demand", "prompt_tokens", "completion_tokens", "point", "lower", "upper",
               "alpha_t", "covered", "above", "alarm", "alarm_reason", "coverage_so_far",
               "gap_reason", "samples", "resets", "martingale", "energy_j", "j_per_token",
               "j_per_output_token", "gco2_per_kwh", "gco2_per_token", "energy_gap_reason",
               "refit", "energy_basis", *SERVING_COLUMNS)


def live_run(con, name: str) -> dict | None:
    """The stored run ``name``: ``{"name", "config" (dict), "first_ts", "started_at", "bins",
    "last_ts", "alarms", "gaps", "dataset"}`` (bins with the alarm up, bins of unknown demand,
    the series dataset its bins are appended to: None before its first save), or None."""
    with con.cursor() as cur:
        row = _run(cur, "SELECT r.name, r.config, r.first_ts, r.started_at, count(b.ts), "
                        "max(b.ts), count(*) FILTER (WHERE b.alarm), "
                        "count(b.ts) FILTER (WHERE b.demand IS NULL), r.dataset FROM live_runs r "
                        "LEFT JOIN live_bins b USING (name) WHERE r.name = ? "
                        "GROUP BY ALL", [name]).fetchone()
    if row is None:
        return None
    return {"name": row[0], "config": json.loads(row[1]), "first_ts": row[2],
            "started_at": row[3], "bins": int(row[4]), "last_ts": row[5], "alarms": int(row[6]),
            "gaps": int(row[7]), "dataset": row[8]}


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
        _run(cur, "INSERT INTO live_runs (name, config, first_ts, started_at) "
                  "VALUES (?, ?, ?, ?)",
             [name, json.dumps(config, sort_keys=True, allow_nan=False), first_ts, _now()])


def save_live_bins(con, name: str, records: list[dict]) -> int:
    """Store closed bins of run ``name`` (one transaction; a bin already stored is kept as it
    was) and append the new ones of known demand to the run's series dataset (the module's
    docstring). ``records`` are :meth:`analytics.live.envelope.LiveBin.as_dict` dicts with
    ``prompt_tokens``, ``completion_tokens``, ``samples`` and ``resets``. Returns the rows
    added.

    Raises
    ------
    ValueError
        No run ``name`` (:func:`start_live_run` first).
    StoreError
        A statement failed; nothing of the poll is written.
    """
    records = _checked(name, records)
    rows = [[name, r["ts"], *(r.get(c) for c in BIN_COLUMNS), _now()] for r in records]
    if not rows:
        return 0
    marks = ", ".join("?" for _ in range(len(BIN_COLUMNS) + 3))
    stamps = [r[1] for r in rows]
    with con.cursor() as c, transaction(c) as cur:
        # the bins already stored, over the incoming span only (the primary key's range)
        stored = {r[0] for r in _run(cur, "SELECT ts FROM live_bins WHERE name = ? AND ts "
                                          "BETWEEN ?::TIMESTAMP AND ?::TIMESTAMP",
                                     [name, min(stamps), max(stamps)]).fetchall()}
        cur.executemany(f"INSERT INTO live_bins (name, ts, {', '.join(BIN_COLUMNS)}, "
                        f"closed_at) VALUES ({marks}) ON CONFLICT DO NOTHING", rows)
        new = [r for r in records if _naive(r["ts"]) not in stored]
        _append_series(cur, name, new)
    return len(new)


def _checked(name: str, records: list[dict]) -> list[dict]:
    """``records`` with one record per bin start (the first, as ``live_bins`` keeps it), a
    non-finite demand stored as unknown (None: a gap) and a negative one refused
    (ValueError: a token count never falls)."""
    seen, out = set(), []
    for r in records:
        ts = _naive(r["ts"])
        if ts in seen:
            continue
        seen.add(ts)
        d = r.get("demand")
        if d is not None and not math.isfinite(float(d)):
            r = {**r, "demand": None}
        elif d is not None and float(d) < 0:
            raise ValueError(f"live run {name}: bin {ts:%Y-%m-%d %H:%M} has a negative demand "
                             f"({float(d):g}); a token count never falls")
        out.append(r)
    return out


#: What a dataset name may not hold, replaced by ``-`` in :func:`series_name`.
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9._&-]+")


def series_name(run: str) -> str:
    """The dataset name a run's series is first offered: the run's name with every character a
    dataset name does not allow as ``-``, prefixed ``live-`` unless it starts with ``live``
    (``live:llama-3-8b`` -> ``live-llama-3-8b``); a taken name gets ``-2``, ``-3`` ..."""
    base = _NOT_IN_NAME.sub("-", run).strip("-._&") or "run"
    if not run.isascii():  # letters the name cannot hold: a short hash keeps runs apart
        base = f"{base}-{hashlib.sha256(run.encode()).hexdigest()[:8]}"
    return (base if base.lower().startswith("live") else f"live-{base}")[:96]


def _naive(ts):
    """``ts`` as the naive UTC datetime DuckDB returns for a stored TIMESTAMP."""
    import pandas as pd

    t = pd.Timestamp(ts)
    return (t.tz_convert("UTC").tz_localize(None) if t.tzinfo else t).to_pydatetime()


def _append_series(cur, run: str, records: list[dict]) -> None:
    """Append ``records``' bins of known demand to run ``run``'s series dataset on ``cur``
    (creating it, with every stored bin of known demand, when the run has none or it was
    deleted)."""
    from analytics.store.writes import write_items

    # the run's series: the live dataset of that name whose first file is this run's (a
    # deleted series' name may since be another run's series: never appended to)
    row = _run(cur, "SELECT r.config, r.dataset, d.name FROM live_runs r LEFT JOIN datasets d "
                    "ON d.name = r.dataset AND d.kind = 'demand_series' AND d.format = 'live' "
                    "AND starts_with(d.source, 'live run ' || r.name || ': ') "
                    "WHERE r.name = ?", [run]).fetchone()
    if row is None:
        raise ValueError(f"no live run {run!r}: start it first")
    config, dataset = json.loads(row[0]), row[1]
    if row[2] is None:  # none yet, deleted, or its name now another's: built anew
        # from every stored bin
        every = _run(cur, "SELECT ts, demand FROM live_bins WHERE name = ? ORDER BY ts",
                     [run]).fetchall()
        [made] = write_items(cur, [_series_item(run, config, every, None)])
        dataset = made["dataset"]
        _run(cur, "UPDATE live_runs SET dataset = ? WHERE name = ?", [dataset, run])
    else:
        bins = [(_naive(r["ts"]), r.get("demand")) for r in records]
        if not any(d is not None and math.isfinite(float(d)) for _, d in bins):
            return
        write_items(cur, [_series_item(run, config, bins, dataset)])
    # one line for the series, not one per append (each append is a dataset_files row)
    known, gaps = _run(cur, "SELECT count(demand), count(*) - count(demand) FROM live_bins "
                            "WHERE name = ?", [run]).fetchone()
    _run(cur, "UPDATE datasets SET warnings = ? WHERE name = ?",
         [f"the live series of run {run!r}: {known:,} bin(s) of known demand, appended as "
          "they closed" + (f"; {gaps:,} bin(s) of unknown demand (gaps of the live source, "
                           "kept as gaps by the run) have no row, and this series' grid reads "
                           "them as 0 tokens" if gaps else ""), dataset])


def _series_item(run: str, config: dict, bins: list, append_to: str | None):
    """The ingest item of ``bins`` (``(ts, demand or None)``, time order) of run ``run``: a
    ``demand_series`` frame of its known bins (``tokens`` = the run's weighted-token demand),
    its provenance and the sha256 of its rows (which identifies the append in
    ``dataset_files``); appended to dataset ``append_to``, or a new dataset when None."""
    import polars as pl

    from analytics.schema import Parsed
    from analytics.store.writes import IngestItem

    bin_s = int(config.get("bin_s", 300))
    known = [(t, float(d)) for t, d in bins if d is not None and math.isfinite(float(d))]
    frame = pl.DataFrame({"ts": [t for t, _ in known], "bin_s": [bin_s] * len(known),
                          "tokens": [d for _, d in known], "requests": [None] * len(known)},
                         schema={"ts": pl.Datetime("us"), "bin_s": pl.Int32,
                                 "tokens": pl.Float64, "requests": pl.Int64})
    span = (f"bins {bins[0][0]:%Y-%m-%d %H:%M} to {bins[-1][0]:%Y-%m-%d %H:%M} UTC"
            if bins else "no bins yet")
    engine = config.get("engine", "vllm")
    weights = f"{config.get('w_prompt', 1.0):g} / {config.get('w_completion', 1.0):g}"
    parsed = Parsed(
        table="demand_series", format="live", frame=frame, source=f"live run {run}: {span}",
        resolution_s=float(bin_s),
        sources={"ts": "the bin's start (UTC)",
                 "tokens": f"the {engine} engine's prompt and generation token counters of "
                           f"model {config.get('model')!r}: increases per bin, weighted "
                           f"{weights} (prompt / completion)"},
        assumptions=(f"bins of {bin_s} s closed by the live follower; a counter reset (an "
                     "engine restart) is counted as Prometheus' increase() counts it",))
    digest = hashlib.sha256(json.dumps(
        [run, append_to is None and _now().isoformat(),
         [[t.isoformat(), d] for t, d in known]]).encode()).hexdigest()
    return IngestItem(parsed=parsed, name=series_name(run), sha256=digest,
                      alternatives=() if append_to is None else None, append_to=append_to)


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
