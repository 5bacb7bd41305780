"""The grid of an attached (left-in-place) partitioned dataset against DuckDB's own
``GROUP BY time_bucket`` over the same files, in one run (issue 28 item 4 goal: <= 1.2x CPU).

The rows are real token counts of the Azure LLM 2023 conversation trace (``$HEADROOM_SHARED_
DATA``, default ../shared/data) drawn with replacement, ``--rows`` of them (default 1e8) spread
evenly over ``--days`` days with a uniform jitter (the grid does not care about the arrival
process), written by DuckDB as Parquet partitioned by day (``date=YYYY-MM-DD/``, hive). The
headroom side is ``headroom attach`` once (its validation: the row groups' statistics and the
file list; timed apart) and then ``services.demand.grid`` (the ledger row, the field probes, the
grid, pandas out) as the CLI and the pages call it; the raw side is one ``GROUP BY
time_bucket`` with the same sums over ``read_parquet(glob, hive_partitioning = true)``, numpy
out, zero bins not filled. CPU time (``time.process_time``; DuckDB's threads count) is the
median of ``--repeat`` alternating runs; the load is printed before and after.

    python bench/bench_attach.py [--rows 100000000] [--days 30] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analytics import store  # noqa: E402
from analytics.ingest.attach import attach  # noqa: E402
from analytics.services import demand  # noqa: E402

DATA = Path(os.environ.get("HEADROOM_SHARED_DATA",
                           Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
TRACE = DATA / "azure_llm" / "AzureLLMInferenceTrace_conv.csv"
GOAL = 1.2

RAW = """
SELECT time_bucket(INTERVAL 300 SECOND, ts, TIMESTAMP '1970-01-01') AS bin, count(*) AS requests,
       sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
       sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)) AS tokens
FROM read_parquet(?, hive_partitioning = true) GROUP BY bin ORDER BY bin
"""


def write_partitions(con, folder: Path, rows: int, days: int) -> str:
    """``rows`` resampled real rows as day partitions under ``folder``; returns the glob."""
    with con.cursor() as cur:
        cur.execute("CREATE TEMP TABLE real AS SELECT row_number() OVER () - 1 AS i, "
                    "ContextTokens::BIGINT AS p, GeneratedTokens::BIGINT AS c "
                    "FROM read_csv(?, header = true)", [str(TRACE)])
        n = cur.execute("SELECT count(*) FROM real").fetchone()[0]
        gap_us = days * 86400e6 / rows
        cur.execute(f"""
            COPY (SELECT ts, p AS prompt_tokens, c AS completion_tokens, ts::DATE AS date
                  FROM (SELECT TIMESTAMP '2023-11-16' + to_microseconds(
                               ((r + random()) * {gap_us})::BIGINT) AS ts,
                               (hash(r) % {n})::BIGINT AS k FROM range({rows}) t(r)) s
                  JOIN real ON real.i = s.k)
            TO '{folder}' (FORMAT parquet, PARTITION_BY (date), OVERWRITE_OR_IGNORE)""")
        cur.execute("DROP TABLE real")
    return str(folder / "date=*" / "*.parquet")


def cpu(fn, *args) -> tuple[float, object]:
    t = time.process_time()
    out = fn(*args)
    return time.process_time() - t, out


def raw_grid(con, pattern: str) -> dict:
    with con.cursor() as cur:
        return cur.execute(RAW, [pattern]).fetchnumpy()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None,
                    help="write (or reuse) the partitions here instead of a temporary folder")
    args = ap.parse_args()
    print(f"goal: the grid of an attached dataset <= {GOAL}x the CPU of DuckDB's own GROUP BY "
          f"over the same files ({args.rows:,} rows, {args.days} days, 5-min bins); "
          f"load {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp) / "logs"
        con = store.connect(Path(tmp) / "bench.duckdb")
        t0 = time.perf_counter()
        pattern = (str(folder / "date=*" / "*.parquet") if args.keep and folder.exists()
                   else write_partitions(con, folder, args.rows, args.days))
        size = sum(p.stat().st_size for p in folder.rglob("*.parquet"))
        print(f"  partitions: {len(list(folder.glob('date=*')))} days, {size / 1e6:,.0f} MB "
              f"({time.perf_counter() - t0:.1f} s wall)")
        t, report = cpu(attach, con, "logs", pattern)
        print(f"  attach (list, describe, check): {t:.3f} s CPU, {report['rows']:,} rows; "
              f"{'; '.join(report['checks'])}")
        req = demand.GridRequest("logs", 300)
        demand.grid(con, req)  # warm both sides alike (the OS page cache)
        raw_grid(con, pattern)
        times = {"headroom": [], "raw": []}
        for _ in range(args.repeat):
            t, grid = cpu(demand.grid, con, req)
            times["headroom"].append(t)
            t, raw = cpu(raw_grid, con, pattern)
            times["raw"].append(t)
        med = {k: statistics.median(v) for k, v in times.items()}
        ratio = med["headroom"] / med["raw"]
        print(f"  grid: headroom {med['headroom']:.3f} s CPU (runs {times['headroom']}), raw "
              f"{med['raw']:.3f} s CPU: ratio {ratio:.2f}x ({'met' if ratio <= GOAL else 'NOT met'}"
              f"; {len(grid.frame) if hasattr(grid, 'frame') else len(grid):,} bins, "
              f"{len(raw['bin']):,} non-empty)")
        con.close()
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
