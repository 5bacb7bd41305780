"""Ingest throughput: ``headroom ingest`` (parse + validate + one-transaction write) against a raw
DuckDB ``read_csv`` of the same file into a table, in one run.

Generates a BurstGPT-schema CSV (``Timestamp, Model, Request tokens, Response tokens,
Total tokens, Log Type``) with a seeded generator, then runs each side in its own child process
(so peak RSS is each side's own) ``--repeat`` times and prints rows/s, the median wall time,
peak RSS and the headroom / raw time ratio.

    python bench/bench_ingest.py [--rows 2000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def make_file(path: Path, rows: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.exponential(0.25, rows)).round().astype(np.int64)
    req = rng.lognormal(6.2, 1.0, rows).astype(np.int64) + 1
    resp = rng.lognormal(5.0, 1.1, rows).astype(np.int64)
    resp[rng.random(rows) < 0.02] = 0  # failed requests
    model = np.where(rng.random(rows) < 0.8, "ChatGPT", "GPT-4")
    log = np.where(rng.random(rows) < 0.9, "Conversation log", "API log")
    with open(path, "w") as fh:
        fh.write("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
        step = 200_000
        for i in range(0, rows, step):
            s = slice(i, i + step)
            lines = [f"{a},{b},{c},{d},{c + d},{e}\n" for a, b, c, d, e in
                     zip(ts[s], model[s], req[s], resp[s], log[s], strict=True)]
            fh.writelines(lines)


def run_side(side: str, csv: Path, db: Path) -> dict:
    t = time.perf_counter()
    # each side imports only its own stack inside the child process, so that the peak RSS
    # measured below is that side's alone (the imports are the point, not a hidden dependency)
    if side == "headroom":
        from analytics import store
        from analytics.ingest import files as ingest

        con = store.connect(db)
        res = ingest.ingest_files(con, [ingest.FileIn(csv, csv.name)])
        rows = res[0]["rows"]
        con.close()
    else:
        import duckdb

        con = duckdb.connect(str(db))
        con.execute(f"CREATE TABLE t AS SELECT * FROM read_csv('{csv}')")
        rows = con.execute("SELECT count(*) FROM t").fetchone()[0]
        con.close()
    wall = time.perf_counter() - t
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"side": side, "rows": rows, "wall_s": wall, "peak_rss_mb": rss_mb}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", nargs=3, metavar=("SIDE", "CSV", "DB"))
    args = ap.parse_args()
    if args.child:
        side, csv, db = args.child
        print(json.dumps(run_side(side, Path(csv), Path(db))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "burstgpt_like.csv"
        make_file(csv, args.rows)
        size_mb = csv.stat().st_size / 1e6
        results: dict[str, list[dict]] = {"headroom": [], "duckdb_read_csv": []}
        for i in range(args.repeat):
            for side in results:
                db = Path(tmp) / f"{side}_{i}.duckdb"
                out = subprocess.run([sys.executable, __file__, "--child", side, str(csv),
                                      str(db)], capture_output=True, text=True, check=True)
                results[side].append(json.loads(out.stdout))
                db.unlink()
        print(f"file: {args.rows:,} rows, {size_mb:.0f} MB (BurstGPT schema), "
              f"{args.repeat} runs per side, each in a fresh process")
        med = {}
        for side, runs in results.items():
            walls = [r["wall_s"] for r in runs]
            med[side] = statistics.median(walls)
            print(f"  {side:17s} median {med[side]:6.2f} s (min {min(walls):.2f}, max "
                  f"{max(walls):.2f})  {args.rows / med[side]:>12,.0f} rows/s  peak RSS "
                  f"{max(r['peak_rss_mb'] for r in runs):,.0f} MB")
        print(f"  ratio headroom / raw DuckDB read_csv: {med['headroom'] / med['duckdb_read_csv']:.2f}x "
              "(headroom also validates every cell, flags failures and writes the ledger)")


if __name__ == "__main__":
    main()
