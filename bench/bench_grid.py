"""5-minute demand grid from the store against a raw DuckDB ``GROUP BY time_bucket`` of the same
table, in one run (issue 15 goal: <= 1.2x the raw query's CPU).

Both trace shapes are benched from real rows: the BurstGPT slice (model, prompt and response
tokens, failed requests) and the Azure LLM inference trace (timestamps with 7 fraction digits,
no model) in the shared data folder ($HEADROOM_SHARED_DATA, default ../shared/data) are
parsed by headroom's own formats, then ``--rows`` rows are resampled from them (with
replacement), spread over ``--days`` days of Poisson arrivals and written to a fresh store
through ``store.ingest``. The headroom side is what the CLI and the pages call,
``services.demand.grid`` (ledger row, target resolution, the grid itself, pandas out); the raw
side is one ``GROUP BY time_bucket`` with the same sums, numpy out, zero bins not filled.
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

RAW_SQL = """
SELECT time_bucket(INTERVAL 300 SECOND, ts, TIMESTAMP '1970-01-01') AS bin, count(*) AS requests,
       sum(failed::INTEGER) AS failed, sum(prompt_tokens) AS prompt_tokens,
       sum(completion_tokens) AS completion_tokens,
       sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)) AS tokens,
       sum(gpu_s) AS gpu_s
FROM requests WHERE dataset_id = ? GROUP BY bin ORDER BY bin
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


def raw_grid(con, dataset_id: int) -> dict:
    """The raw side: one GROUP BY time_bucket, numpy columns out (no zero bins)."""
    with con.cursor() as cur:
        return cur.execute(RAW_SQL, [dataset_id]).fetchnumpy()


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
        for shape, path in SHAPES.items():
            item = resampled(path, args.rows, args.days)
            store.ingest(con, [item])
            dataset_id = int(store.dataset(con, item.name)["dataset_id"])
            req = demand.GridRequest(item.name, 300)
            demand.grid(con, req)  # warm the caches of both sides alike
            times = {"headroom": [], "raw": []}
            for _ in range(args.repeat):
                t, grid = cpu(demand.grid, con, req)
                times["headroom"].append(t)
                t, raw = cpu(raw_grid, con, dataset_id)
                times["raw"].append(t)
            med = {k: statistics.median(v) for k, v in times.items()}
            ratio = med["headroom"] / med["raw"]
            print(f"  {shape:9s} headroom {med['headroom']:.3f} s CPU, raw {med['raw']:.3f} s "
                  f"CPU: ratio {ratio:.2f}x ({'met' if ratio <= GOAL else 'NOT met'}; "
                  f"{len(grid):,} bins, {len(raw['bin']):,} non-empty)")
        con.close()
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
