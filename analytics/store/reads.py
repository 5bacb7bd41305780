"""Reads of the store: the ledger, demand grids, site series, GPU jobs, benchmarks, reference
CDFs and advisor model versions (each materialised before it returns). A dataset's summary and
provenance: :mod:`analytics.store.summaries`."""

from __future__ import annotations

from datetime import datetime, timedelta

from analytics.config import Weights
from analytics.lazy import lazy_module
from analytics.schema import COLUMNS
from analytics.store import attached
from analytics.store.attached_files import AttachedChanged
from analytics.store.core import DATA_TABLES, UnknownDataset, _run

# pandas / numpy only when a frame is asked for: `headroom datasets` reads the ledger without
# them (:func:`ledger_records`)
np = lazy_module("numpy")
pd = lazy_module("pandas")


def list_datasets(con) -> pd.DataFrame:
    """The ledger, oldest first: dataset_id, name, kind, format, source, sha256 (of the bytes
    ingested: the data version a result belongs to), rows, ts_min, ts_max,
    resolution_s, source_tz (IANA zone local times were converted from; None: UTC as written),
    ingested_at, synthetic, warnings."""
    with con.cursor() as cur:
        return _run(
            cur,
            "SELECT dataset_id, name, kind, format, source, sha256, rows, ts_min, ts_max, "
            "resolution_s, "
            "source_tz, ingested_at, synthetic, warnings FROM datasets ORDER BY dataset_id",
        ).df()


def ledger_records(con) -> list[dict]:
    """The ledger as plain records (no pandas), oldest first: the columns of
    :func:`list_datasets`; times are ``datetime`` (naive UTC) or None."""
    with con.cursor() as cur:
        res = _run(cur, "SELECT dataset_id, name, kind, format, source, rows, ts_min, ts_max, "
                        "resolution_s, source_tz, ingested_at, synthetic, warnings FROM datasets "
                        "ORDER BY dataset_id")
        names = [d[0] for d in res.description]
        return [dict(zip(names, row, strict=True)) for row in res.fetchall()]


def dataset(con, name: str) -> dict:
    """One ledger row as a dict. Raises UnknownDataset."""
    with con.cursor() as cur:
        res = _run(cur, "SELECT * FROM datasets WHERE name = ?", [name])
        names = [d[0] for d in res.description]
        rows = res.fetchall()
    if not rows:
        raise UnknownDataset(name)
    # timestamps as pandas Timestamps (NaT when empty), as callers compute with them
    return {k: (pd.Timestamp(v) if v is not None else pd.NaT) if k in _LEDGER_TS else v
            for k, v in zip(names, rows[0], strict=True)}


_LEDGER_TS = ("ts_min", "ts_max", "ingested_at")


def table_counts(con) -> dict[str, int]:
    """Row count of the ledger and of every canonical table (one statement)."""
    tables = ("datasets", *DATA_TABLES)
    sql = " UNION ALL ".join(f"SELECT {i} AS i, count(*) FROM {t}" for i, t in enumerate(tables))
    with con.cursor() as cur:
        got = dict(_run(cur, sql).fetchall())
    return {t: int(got[i]) for i, t in enumerate(tables)}


def _rows_sql(cur, info: dict) -> str:
    cols_k = COLUMNS[info["kind"]]
    order = "ts" if "ts" in cols_k else ("submit_ts" if "submit_ts" in cols_k else "1")
    table = info["kind"] if info["kind"] != "requests" else \
        attached.source(cur, int(info["dataset_id"]), info["name"])
    return (f"SELECT {', '.join(cols_k)} FROM {table} AS rows "
            f"WHERE dataset_id = {int(info['dataset_id'])} ORDER BY {order}")


def dataset_rows(con, name: str) -> pd.DataFrame:
    """All rows of one dataset in its canonical columns, in time order (an attached dataset's
    read from its files). Raises UnknownDataset, AttachedChanged."""
    info = dataset(con, name)
    with con.cursor() as cur:
        return _run(cur, _rows_sql(cur, info)).df()


def copy_dataset(con, name: str, path, fmt: str) -> int:
    """Write every row of one dataset (canonical columns, time order) to the file ``path`` as
    ``csv`` (with a header) or ``parquet`` by DuckDB's ``COPY``, which streams: memory does not
    grow with the dataset (the browser download of a 20 M-row dataset built in memory passed
    6 GB; break-it review). Returns the rows written. Raises UnknownDataset, ValueError (an
    unknown format)."""
    if fmt not in ("csv", "parquet"):
        raise ValueError(f"unknown format {fmt!r}: use csv or parquet")
    info = dataset(con, name)
    target = "'" + str(path).replace("'", "''") + "'"
    options = "FORMAT csv, HEADER true" if fmt == "csv" else "FORMAT parquet"
    with con.cursor() as cur:
        _run(cur, f"COPY ({_rows_sql(cur, info)}) TO {target} ({options})")
    return int(info["rows"])


#: Columns of :func:`requests_grid` and their dtypes (also those of an empty grid).
_GRID_COLS = {"requests": "int64", "failed": "int64", "prompt_tokens": "float64",
              "completion_tokens": "float64", "tokens": "float64", "gpu_s": "float64",
              "target": "float64", "unknown_tokens": "int64"}
_EPOCH = "TIMESTAMP '1970-01-01'"


def requests_grid(con, dataset_id: int, bin_s: int, weights: Weights,
                  known: tuple | None = None) -> pd.DataFrame:
    """Complete, zero-filled grid of one request dataset.

    ``known``: ``(ts_min, ts_max, empty_tokens)`` when the caller has read them (the ledger
    row's span and :func:`request_fields`' ``empty_tokens``); else they are read here.

    Returns
    -------
    DataFrame with one row per bin from the first request's bin to the last one's:
    ``ts`` (bin start, UTC), ``requests``, ``failed``, ``prompt_tokens``, ``completion_tokens``,
    ``tokens`` (prompt + completion), ``gpu_s`` (GPU busy seconds, where the trace has them) and
    ``target``: weighted tokens (see :class:`analytics.config.Weights`), or GPU-seconds when
    ``weights.target == "gpu_seconds"``; ``unknown_tokens``: requests of the bin whose prompt or
    completion count is empty (Mooncake lines without ``output_length``, empty cells; 0 for the
    GPU-seconds target). Their known tokens are counted and the unknown ones are not (never a
    guess): in bins with ``unknown_tokens > 0`` the weighted-token target is a lower bound.
    Bins are aligned to the Unix epoch.

    One pass over the dataset's rows (a ``GROUP BY time_bucket``); the first and last bin come
    from the ledger's ``ts_min`` / ``ts_max`` (every row, failed ones too), and the bins without
    requests are filled with zeros here, not by a join in SQL.
    """
    gpu = weights.target == "gpu_seconds"
    with con.cursor() as cur:
        src = attached.source(cur, dataset_id)
        # the bounds, and whether any token count is empty (segment statistics answer it)
        lo_hi = [known] if known is not None else _run(cur, f"""
            SELECT ts_min, ts_max,
                   EXISTS (SELECT 1 FROM {src} AS r WHERE dataset_id = $id
                           AND prompt_tokens IS NULL)
                   OR EXISTS (SELECT 1 FROM {src} AS r WHERE dataset_id = $id
                              AND completion_tokens IS NULL)
            FROM datasets WHERE dataset_id = $id""", {"id": dataset_id}).fetchall()
        if not lo_hi or lo_hi[0][0] is None:
            return _empty_grid()
        ts_min, ts_max, has_empty = lo_hi[0]
        sql, params = _requests_grid_sql(dataset_id, bin_s, weights, gpu, has_empty, src)
        per_model = _model_weights(weights) if weights.per_model and not gpu else None
        if per_model is not None:
            cur.register("model_weights", per_model)
        try:
            agg = _run(cur, sql, params).fetchnumpy()
        finally:
            if per_model is not None:
                cur.unregister("model_weights")
    if "target" not in agg:
        agg["target"] = agg["gpu_s" if gpu else "tokens"]
    return _zero_filled(agg, bin_s, ts_min, ts_max)


def _requests_grid_sql(dataset_id: int, bin_s: int, weights: Weights, gpu: bool,
                       has_empty: bool = True, src: str = "requests") -> tuple[str, dict]:
    """The one-pass aggregate of :func:`requests_grid`: one row per non-empty bin, ``bin_us``
    (bin start, microseconds since the epoch) and the grid's columns (NULL sums kept).
    ``has_empty``: whether any prompt or completion count of the dataset is empty (when none
    is, ``unknown_tokens`` is 0 without a per-row test); ``src``: the relation of the rows
    (:func:`analytics.store.attached.source`)."""
    params = {"bin": bin_s, "id": dataset_id}
    if gpu or (not weights.per_model and weights.w_prompt == 1 and weights.w_completion == 1):
        # the GPU-seconds target is the gpu_s column, the default weights' target the token
        # total (integer sums, exact): :func:`_zero_filled` copies that column
        target = ""
    else:
        wp, wc = ("coalesce(mw.w_p, $wp)", "coalesce(mw.w_c, $wc)") if weights.per_model \
            else ("$wp", "$wc")
        params |= {"wp": weights.w_prompt, "wc": weights.w_completion}
        target = (f", sum(CASE WHEN r.prompt_tokens IS NULL AND r.completion_tokens IS NULL "
                  f"THEN NULL ELSE {wp} * coalesce(r.prompt_tokens, 0) "
                  f"+ {wc} * coalesce(r.completion_tokens, 0) END)::DOUBLE AS target")
    join = ("LEFT JOIN model_weights mw ON r.model = mw.model"
            if weights.per_model and not gpu else "")
    # rows with an empty prompt or completion count: p + c is NULL when either is
    unknown = "0" if gpu or not has_empty else \
        "count(*) - count(r.prompt_tokens + r.completion_tokens)"
    bucket = f"time_bucket(to_seconds($bin), r.ts, {_EPOCH})"  # grouped on: epoch_us per bin
    sql = f"""
    SELECT epoch_us({bucket}) AS bin_us,
           count(*) AS requests, count(*) FILTER (WHERE r.failed) AS failed,
           sum(r.prompt_tokens)::DOUBLE AS prompt_tokens,
           sum(r.completion_tokens)::DOUBLE AS completion_tokens,
           (coalesce(sum(r.prompt_tokens), 0) + coalesce(sum(r.completion_tokens), 0))::DOUBLE
             AS tokens,
           sum(r.gpu_s)::DOUBLE AS gpu_s, {unknown} AS unknown_tokens {target}
    FROM {src} r {join}
    WHERE r.dataset_id = $id {"" if weights.include_failed else "AND NOT r.failed"}
    GROUP BY {bucket}
    """
    return sql, params


def _model_weights(weights: Weights) -> pd.DataFrame:
    return pd.DataFrame(list(weights.per_model), columns=["model", "w_p", "w_c"]).astype(
        {"model": "string", "w_p": "float64", "w_c": "float64"})


def _empty_grid() -> pd.DataFrame:
    return pd.DataFrame({"ts": np.array([], dtype="datetime64[us]"),
                         **{c: np.array([], dtype=t) for c, t in _GRID_COLS.items()}})


def _zero_filled(agg: dict, bin_s: int, ts_min, ts_max) -> pd.DataFrame:
    """The grid frame from the non-empty bins of ``agg`` (numpy columns, ``bin_us`` first):
    every bin from ``ts_min``'s to ``ts_max``'s (epoch-aligned), zeros where ``agg`` has none."""
    step = bin_s * 1_000_000
    lo, hi = (_epoch_us(t) // step * step for t in (ts_min, ts_max))
    bins = np.asarray(agg["bin_us"], dtype=np.int64)
    if bins.size and (bins.min() < lo or bins.max() > hi):  # a ledger out of step: widen
        lo, hi = min(lo, int(bins.min())), max(hi, int(bins.max()))
    n = (hi - lo) // step + 1
    pos = (bins - lo) // step
    out = {"ts": (lo + step * np.arange(n, dtype=np.int64)).astype("datetime64[us]")}
    for col, dtype in _GRID_COLS.items():
        col_out = np.zeros(n, dtype=dtype)
        values = agg[col]
        if np.ma.isMaskedArray(values):
            values = values.filled(0)
        col_out[pos] = values
        out[col] = col_out
    return pd.DataFrame(out)


def _epoch_us(ts: datetime) -> int:
    """Microseconds since the Unix epoch of a naive (UTC) timestamp."""
    return (ts - datetime(1970, 1, 1)) // timedelta(microseconds=1)


#: :func:`request_fields`' answers and the condition each probes for (one row is enough).
_FIELD_PROBES = {
    "tokens": "prompt_tokens IS NOT NULL",
    "completion_tokens": "completion_tokens IS NOT NULL",
    "gpu_s": "gpu_s IS NOT NULL",
    "model": "model IS NOT NULL",
    "latency_s": "latency_s IS NOT NULL",
    # a row with an empty prompt or completion count (what requests_grid asks: ``known``)
    "empty_tokens": "prompt_tokens IS NULL OR completion_tokens IS NULL",
}


def request_fields(con, dataset_id: int, names=None) -> dict[str, bool]:
    """Which optional request fields a dataset actually has (any non-empty value), and
    ``empty_tokens``: whether any of its rows has an empty prompt or completion count.

    ``names``: the answers wanted (default all: ``tokens``, ``completion_tokens``, ``gpu_s``,
    ``model``, ``latency_s``, ``empty_tokens``); each costs about 1 ms. Each is an ``EXISTS``
    probe that stops at the first matching row (and skips whole segments whose statistics say
    they hold none), not a scan of the dataset.
    """
    names = tuple(_FIELD_PROBES) if names is None else tuple(names)
    with con.cursor() as cur:
        src = attached.source(cur, dataset_id)
        probes = ", ".join(f"EXISTS (SELECT 1 FROM {src} AS r WHERE dataset_id = $id AND "
                           f"({_FIELD_PROBES[n]}))" for n in names)
        row = _run(cur, f"SELECT {probes}", {"id": dataset_id}).fetchone()
    return dict(zip(names, (bool(v) for v in row), strict=True))


def series_grid(con, dataset_id: int, bin_s: int) -> pd.DataFrame:
    """Complete, zero-filled grid of a pre-binned ``demand_series`` dataset re-binned to ``bin_s``.

    Returns ``ts``, ``requests`` (NULL where the source has no counts), ``tokens`` and
    ``target`` (= tokens: pre-binned series carry no prompt / completion split, so weights do
    not apply).
    """
    sql = """
    WITH agg AS (
      SELECT time_bucket(to_seconds($bin), ts, TIMESTAMP '1970-01-01') AS bin,
             sum(requests) AS requests, count(requests) AS with_counts, sum(tokens) AS tokens
      FROM demand_series WHERE dataset_id = $id GROUP BY bin
    ), has AS (SELECT sum(with_counts) > 0 AS has_counts FROM agg),  -- no second scan
    bounds AS (SELECT min(bin) AS lo, max(bin) AS hi FROM agg),
    grid AS (SELECT unnest(generate_series(lo, hi, to_seconds($bin))) AS ts FROM bounds)
    SELECT g.ts,
           CASE WHEN (SELECT has_counts FROM has) THEN coalesce(a.requests, 0) END::BIGINT
             AS requests,
           coalesce(a.tokens, 0)::DOUBLE AS tokens,
           coalesce(a.tokens, 0)::DOUBLE AS target
    FROM grid g LEFT JOIN agg a ON g.ts = a.bin
    ORDER BY g.ts
    """
    with con.cursor() as cur:
        return _run(cur, sql, {"bin": bin_s, "id": dataset_id}).df()


def demand_minutes(con) -> pd.DataFrame:
    """Minutes with demand in every request and demand-series dataset (one pass per table).

    Returns
    -------
    DataFrame ``name``, ``active_min`` (distinct epoch-aligned minutes holding at least one
    request, or a series value with tokens > 0) and ``span_min`` (minutes from the first row's
    minute to the last one's, both included: the 1-minute grid's length). The share of empty
    minutes, ``1 - active_min / span_min``, is what the power simulator's sparsity rule judges
    (:func:`analytics.power.inputs.too_sparse`).
    """
    sql = """
    SELECT d.name, a.active_min,
           (epoch(d.ts_max)::BIGINT // 60 - epoch(d.ts_min)::BIGINT // 60 + 1) AS span_min
    FROM datasets d JOIN (
      SELECT dataset_id, count(DISTINCT epoch(ts)::BIGINT // 60) AS active_min
      FROM requests GROUP BY dataset_id
      UNION ALL
      SELECT dataset_id, count(DISTINCT epoch(ts)::BIGINT // 60) AS active_min
      FROM demand_series WHERE tokens > 0 OR requests > 0 GROUP BY dataset_id{attached}
    ) a USING (dataset_id)
    WHERE d.ts_min IS NOT NULL
    ORDER BY d.dataset_id
    """
    with con.cursor() as cur:
        parts = []
        for name, i in attached.attached_names(con).items():
            try:  # an attached dataset whose files changed is left out until refreshed
                src = attached.source(cur, i, name)
            except AttachedChanged:
                continue
            parts.append(f" UNION ALL SELECT dataset_id, count(DISTINCT epoch(ts)::BIGINT // 60)"
                         f" FROM {src} AS r GROUP BY dataset_id")
        return _run(cur, sql.replace("{attached}", "".join(parts))).df()


SITE_TABLES = {"carbon_intensity": "gco2_per_kwh", "weather": "temp_c", "prices": "usd_per_mwh"}


def site_catalog(con) -> pd.DataFrame:
    """Every site with hourly site data: table (``tbl``), ``site``, ``basis`` (carbon only),
    ``dataset``, ts range, ``rows`` and ``alias_of``: for a site code registered as an alias
    (:func:`ingest`: the same bytes under another site name), the stored site whose series it
    names, else None. An alias has the rows of its site, one row per (table, site, dataset)."""
    parts = []
    with con.cursor() as cur:
        for table in SITE_TABLES:
            basis = "basis" if table == "carbon_intensity" else "NULL"
            parts.append(_run(
                cur,
                f"SELECT '{table}' AS tbl, t.site, {basis} AS basis, d.name AS dataset, "
                "min(t.ts) AS ts_min, max(t.ts) AS ts_max, count(*) AS rows, "
                "NULL::VARCHAR AS alias_of "
                f"FROM {table} t JOIN datasets d USING (dataset_id) GROUP BY ALL "
                f"UNION ALL SELECT '{table}' AS tbl, a.alias AS site, {basis} AS basis, "
                "d.name AS dataset, min(t.ts) AS ts_min, max(t.ts) AS ts_max, count(*) AS rows, "
                f"a.site AS alias_of FROM {table} t "
                f"JOIN site_aliases a ON a.dataset_id = t.dataset_id AND a.site = t.site "
                f"AND a.tbl = '{table}' JOIN datasets d ON d.dataset_id = t.dataset_id "
                "GROUP BY ALL ORDER BY site, dataset"
            ).df())
    return pd.concat(parts, ignore_index=True)


def synthetic_names(con, names=(), kinds: tuple[str, ...] = (),
                    sites: tuple[str, ...] = ()) -> list[str]:
    """Names of the synthetic datasets (``datasets.synthetic``) among ``names``, of the
    canonical tables ``kinds``, and holding a site series of ``sites`` (a site code or an
    alias), in ledger order."""
    site_q = " UNION ALL ".join(
        f"SELECT dataset_id FROM {t} WHERE site IN (SELECT unnest(?::VARCHAR[])) UNION ALL "
        f"SELECT dataset_id FROM site_aliases WHERE tbl = '{t}' "
        "AND alias IN (SELECT unnest(?::VARCHAR[]))" for t in SITE_TABLES)
    with con.cursor() as cur:
        rows = _run(cur, "SELECT name FROM datasets WHERE synthetic AND (name IN "
                         "(SELECT unnest(?::VARCHAR[])) OR kind IN (SELECT unnest(?::VARCHAR[])) "
                         f"OR dataset_id IN ({site_q})) ORDER BY dataset_id",
                    [sorted(names), list(kinds), *[list(sites)] * (2 * len(SITE_TABLES))]
                    ).fetchall()
    return [r[0] for r in rows]


def site_hourly(con, table: str, site: str, basis: str | None = None) -> pd.DataFrame:
    """Hourly mean of a site's series: ``ts`` (hour, UTC) and ``value`` (the table's unit).

    ``site`` may be an alias (:func:`site_catalog` ``alias_of``): the rows of the series it
    names are read as if stored under it. Raises KeyError for a table that holds no site series.
    """
    col = SITE_TABLES[table]
    where = ("(t.site = $site OR EXISTS (SELECT 1 FROM site_aliases a WHERE a.tbl = $tbl "
             "AND a.alias = $site AND a.dataset_id = t.dataset_id AND a.site = t.site))"
             + (" AND t.basis = $basis" if basis else ""))
    params = {"site": site, "tbl": table, **({"basis": basis} if basis else {})}
    with con.cursor() as cur:
        return _run(cur, f"""
            SELECT time_bucket(INTERVAL 1 HOUR, t.ts) AS ts, avg(t.{col}) AS value
            FROM {table} t WHERE {where} GROUP BY 1 ORDER BY 1""", params).df()


def gpu_jobs(con, name: str) -> pd.DataFrame:
    """GPU jobs of one ``jobs`` dataset that ran, in submit order (power simulation input).

    Returns
    -------
    DataFrame with ``job_id``, ``submit_ts``, ``start_ts``, ``end_ts`` (UTC), ``n_gpus``,
    ``gpu_milli`` (total thousandths of a GPU: the stored share, else ``n_gpus * 1000``) and
    ``runtime_s`` (end - start, > 0). Jobs without GPUs, never started, or without an end are
    left out. Raises UnknownDataset.
    """
    info = dataset(con, name)
    with con.cursor() as cur:
        return _run(cur, """
            SELECT job_id, submit_ts, start_ts, end_ts, n_gpus,
                   coalesce(gpu_milli, n_gpus * 1000)::INTEGER AS gpu_milli,
                   epoch(end_ts) - epoch(start_ts) AS runtime_s
            FROM jobs
            WHERE dataset_id = ? AND n_gpus > 0 AND start_ts IS NOT NULL AND end_ts IS NOT NULL
              AND end_ts > start_ts
            ORDER BY submit_ts, job_id""", [int(info["dataset_id"])]).df()


def gpu_jobs_left_out(con, name: str) -> pd.DataFrame:
    """GPU jobs of one ``jobs`` dataset that :func:`gpu_jobs` leaves out, in submit order.

    Returns
    -------
    DataFrame with ``job_id``, ``start_ts``, ``end_ts`` (UTC), ``runtime_s`` (end - start, s;
    NaN when a time is missing) and ``why``: ``no_start`` (never started), ``no_end`` (no end
    time), ``end_before_start`` (negative run time) or ``zero_runtime``. Raises UnknownDataset.
    """
    info = dataset(con, name)
    with con.cursor() as cur:
        return _run(cur, """
            SELECT job_id, start_ts, end_ts, epoch(end_ts) - epoch(start_ts) AS runtime_s,
                   CASE WHEN start_ts IS NULL THEN 'no_start' WHEN end_ts IS NULL THEN 'no_end'
                        WHEN end_ts < start_ts THEN 'end_before_start'
                        ELSE 'zero_runtime' END AS why
            FROM jobs
            WHERE dataset_id = ? AND n_gpus > 0
              AND NOT coalesce(end_ts > start_ts, false)
            ORDER BY submit_ts, job_id""", [int(info["dataset_id"])]).df()



def reference_cdfs(con) -> pd.DataFrame:
    """All reference distributions (source, cluster, metric, cdf_percent, value)."""
    with con.cursor() as cur:
        return _run(cur, "SELECT source, cluster, metric, cdf_percent, value FROM "
                         "reference_cdf ORDER BY source, cluster, metric, cdf_percent").df()


def bench_runs(con) -> pd.DataFrame:
    """Every benchmark row (canonical ``bench_runs`` columns plus ``dataset``), duplicates across
    datasets removed (Argonne repeats rows in several figure tables): one row per distinct
    measured configuration and result."""
    cols = ", ".join("b." + c for c in COLUMNS["bench_runs"])
    with con.cursor() as cur:
        return _run(
            cur,
            f"""SELECT min(d.name) AS dataset, {cols}
                FROM bench_runs b JOIN datasets d USING (dataset_id)
                GROUP BY ALL ORDER BY ALL""").df()


def jobs(con) -> pd.DataFrame:
    """Every row of the ``jobs`` table (canonical columns plus ``dataset``), all states, for
    launch-success priors (:func:`gpu_jobs` is the ran-GPU-jobs view the power simulation uses)."""
    cols = ", ".join("j." + c for c in COLUMNS["jobs"])
    with con.cursor() as cur:
        return _run(cur, f"SELECT d.name AS dataset, {cols} FROM jobs j "
                         "JOIN datasets d USING (dataset_id) ORDER BY d.name, j.submit_ts").df()



def model_versions(con) -> pd.DataFrame:
    """The advisor's model versions, newest first (metrics / envelope as JSON text)."""
    with con.cursor() as cur:
        return _run(cur, "SELECT * FROM model_versions ORDER BY version DESC").df()

