"""5-minute demand grid from the store against a raw DuckDB ``GROUP BY time_bucket`` of the same
table, in one run (issue 15 goal: <= 1.2x the raw query's CPU).

Both trace shapes are benched from real rows: the BurstGPT slice (model, prompt and response
tokens, failed requests) and the Azure LLM inference trace (timestamps with 7 fraction digits,
no model) in the shared data folder ($HEADROOM_SHARED_DATA, default ../shared/data) are
parsed by headroom's own formats, then ``--rows`` rows are resampled from them (with
replacement), spread over ``--days`` days of Poisson arrivals and written to a fresh store
through ``store.ingest``. The headroom side is what the CLI and the pages call,
``services.demand.grid`` (ledger row, target resolution, the grid itself, pandas out); the raw
side is one ``GROUP BY time_bucket`` with the same sums over the stored table that holds the
rows (not the ``requests`` view), numpy out, zero bins not filled. A third run ingests the
Azure rows as a large file (``azure-file``: the direct read into the narrow
``requests_tokens``, schema 13).
CPU time (``time.process_time``; DuckDB's worker threads count) is the median of ``--repeat``
A/B alternating runs. Prints the machine load (``os.getloadavg``).

    python bench/bench_grid.py [--rows 3000000] [--days 30] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analytics import store  # noqa: E402
from analytics.ingest.formats import parse_file  # noqa: E402
from analytics.services import demand  # noqa: E402

DATA = Path(os.environ.get("HEADROOM_SHARED_DATA",
                           Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
SHAPES = {
    "burstgpt": DATA / "burstgpt" / "BurstGPT_3_slice400.csv",
    "azure": DATA / "azure_llm" / "AzureLLMInferenceTrace_conv.csv",
}
GOAL = 1.2



def raw_sql(table: str, columns: set[str]) -> str:
    """The raw side's query over the stored ``table`` that holds the rows (``requests_full``,
    or the narrow ``requests_tokens`` of a large Azure trace: schema 13), summing the columns
    it has: the view ``requests`` headroom reads is charged to headroom."""
    sums = [f"sum({c}) AS {c}" for c in ("prompt_tokens", "completion_tokens", "gpu_s")
            if c in columns]
    failed = ["sum(failed::INTEGER) AS failed"] if "failed" in columns else []
    return f"""
SELECT time_bucket(INTERVAL 300 SECOND, ts, TIMESTAMP '1970-01-01') AS bin, count(*) AS requests,
       {", ".join([*failed, *sums])},
       sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)) AS tokens
FROM {table} WHERE dataset_id = ? GROUP BY bin ORDER BY bin
"""


def resampled(path: Path, rows: int, days: int, seed: int = 0) -> store.IngestItem:
    """``rows`` real rows of ``path`` (drawn with replacement) on ``days`` days of arrivals."""
    parsed = parse_file(path, path.name)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, parsed.frame.height, rows)
    gaps_us = rng.exponential(days * 86400e6 / rows, rows)
    start = parsed.frame["ts"].min()
    ts = pl.Series("ts", np.cumsum(gaps_us).astype(np.int64)).cast(pl.Duration("us")) + start
    frame = parsed.frame[idx].with_columns(ts.alias("ts"))
    p = parsed.__class__(**{**parsed.__dict__, "frame": frame})
    return store.IngestItem(p, path.stem.lower().replace(".", "_"), f"bench-{path.name}-{rows}")


def stored_at(con, dataset_id: int) -> str:
    """The raw side's query for the stored table holding ``dataset_id``'s rows."""
    with con.cursor() as cur:
        for table in store.stored_tables("requests"):
            if cur.execute(f"SELECT count(*) FROM {table} WHERE dataset_id = ?",
                           [dataset_id]).fetchall()[0][0]:
                cols = {r[0] for r in cur.execute(f"DESCRIBE {table}").fetchall()}
                return raw_sql(table, cols)
    raise SystemExit(f"no stored rows for dataset {dataset_id}")


def as_azure_csv(item: store.IngestItem, folder: Path) -> Path:
    """The resampled Azure rows written as the 2023 release writes them (``TIMESTAMP`` with 7
    fraction digits): a large file the product reads directly into ``requests_tokens``."""
    frame = item.parsed.frame
    path = folder / "azure_large.csv"
    frame.select(
        (pl.col("ts").dt.strftime("%Y-%m-%d %H:%M:%S%.6f") + "0").alias("TIMESTAMP"),
        pl.col("prompt_tokens").alias("ContextTokens"),
        pl.col("completion_tokens").alias("GeneratedTokens")).write_csv(path)
    return path


def raw_grid(con, sql: str, dataset_id: int) -> dict:
    """The raw side: one GROUP BY time_bucket, numpy columns out (no zero bins)."""
    with con.cursor() as cur:
        return cur.execute(sql, [dataset_id]).fetchnumpy()


def cpu(fn, *args) -> tuple[float, object]:
    t = time.process_time()
    out = fn(*args)
    return time.process_time() - t, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=3_000_000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"goal: services.demand.grid <= {GOAL}x the CPU of a raw GROUP BY time_bucket "
          f"(5-min bins, {args.rows:,} rows, {args.days} days); load {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        con = store.connect(Path(tmp) / "bench.duckdb")
        for shape, path in [*SHAPES.items(), ("azure-file", SHAPES["azure"])]:
            item = resampled(path, args.rows, args.days)
            if shape == "azure-file":  # the same rows as a large file: ingest's direct read
                from analytics.ingest import files as ingest

                csv = as_azure_csv(item, Path(tmp))
                name = ingest.ingest_files(con, [ingest.FileIn(csv, csv.name)])[0]["dataset"]
                item = store.IngestItem(item.parsed, name, "")
            else:
                store.ingest(con, [item])
            dataset_id = int(store.dataset(con, item.name)["dataset_id"])
            sql = stored_at(con, dataset_id)
            req = demand.GridRequest(item.name, 300)
            demand.grid(con, req)  # warm the caches of both sides alike
            times = {"headroom": [], "raw": []}
            for _ in range(args.repeat):
                t, grid = cpu(demand.grid, con, req)
                times["headroom"].append(t)
                t, raw = cpu(raw_grid, con, sql, dataset_id)
                times["raw"].append(t)
            med = {k: statistics.median(v) for k, v in times.items()}
            ratio = med["headroom"] / med["raw"]
            print(f"  {shape:10s} headroom {med['headroom']:.3f} s CPU, raw {med['raw']:.3f} s "
                  f"CPU: ratio {ratio:.2f}x ({'met' if ratio <= GOAL else 'NOT met'}; "
                  f"{len(grid):,} bins, {len(raw['bin']):,} non-empty)")
        con.close()
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
