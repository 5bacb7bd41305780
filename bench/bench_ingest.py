"""Ingest throughput and memory (issue 15): ``headroom ingest`` against DuckDB's own
``CREATE TABLE AS SELECT * FROM read_csv`` of the same file, in one run.

Goals: the throughput ratio (DuckDB CPU seconds / headroom CPU seconds for the same file, so
1.0 = as fast as DuckDB) >= 0.8 for both trace shapes, and the ``headroom ingest`` CLI process's
peak RSS < 500 MiB at 20 M rows, flat in the file size.

Shapes (real rows resampled, written to a temporary folder, never into the repo):
BurstGPT (numeric ``Timestamp``; rows of ``BurstGPT_1_head400.csv``), Azure LLM 2023
(``TIMESTAMP`` strings with 7 fraction digits; rows of the conversation and code traces) and
canonical (those Azure rows as a user's own canonical requests CSV: ISO ``ts`` with ``T``, a
``model`` column).
Each side runs in its own child process, A/B alternating, ``--repeat`` times; CPU time is
``time.process_time()`` of the ingest call and the store's close (all threads; DuckDB writes a
CREATE TABLE's rows at the checkpoint of its close, headroom's streamed ingest checkpoints
itself; imports before the call excluded on both sides),
the median is quoted. Peak RSS is that of a ``python -m analytics.cli ingest`` child
(``os.wait4`` rusage ``ru_maxrss``). The load average is printed with the results.

For the Azure shape a third side is timed for reference (not in the ratio): DuckDB's own
``INSERT INTO requests_tokens ... SELECT ... FROM read_csv`` of the file into the store's table
for such rows, without checks or hashing: the ceiling of any ingest into that table. (Into the
9-column ``requests`` layout of schema 12 it was 0.68x of the baseline: the five columns a
3-column file leaves empty or constant cost DuckDB 0.6-0.9 s of CPU per 5 M rows; schema 13
keeps such rows in the narrow ``requests_tokens``, :data:`analytics.schema.NARROW`.)

    python bench/bench_ingest.py [--rows 5000000] [--big-rows 20000000] [--repeat 3]
                                 [--shapes burstgpt,azure] [--rss-only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


BURSTGPT_SRC = Path("/work/shared/data/burstgpt/BurstGPT_1_head400.csv")
BURSTGPT_SPAN_S = 121 * 86400
AZURE_SRC = [Path("/work/shared/data/azure_llm/AzureLLMInferenceTrace_conv.csv"),
             Path("/work/shared/data/azure_llm/AzureLLMInferenceTrace_code.csv")]


def make_burstgpt(path: Path, rows: int, seed: int = 0) -> None:
    """``rows`` real BurstGPT_1 rows resampled with replacement (Model, token counts, Log Type
    of one real row each); timestamps (whole seconds, as v1 writes them) are the cumulative sum
    of resampled real inter-arrival gaps scaled so that the file spans :data:`BURSTGPT_SPAN_S`
    (the full trace's 121 days), in time order like the real trace."""
    import polars as pl

    real = pl.read_csv(BURSTGPT_SRC)
    rng = np.random.default_rng(seed)
    gaps = np.diff(real["Timestamp"].to_numpy())
    drawn = rng.choice(gaps, rows).astype(float)
    ts = (np.cumsum(drawn * BURSTGPT_SPAN_S / drawn.sum())).round().astype(np.int64) + int(
        real["Timestamp"][0])
    pick = pl.Series(rng.integers(0, real.height, rows))
    frame = real.drop("Timestamp")[pick].with_columns(pl.Series("Timestamp", ts))
    frame.select(real.columns).write_csv(path)


def make_azure(path: Path, rows: int, seed: int = 0) -> None:
    """``rows`` real Azure LLM 2023 rows (conversation and code traces) resampled with
    replacement; TIMESTAMP strings with 7 fraction digits as the 2023 release writes them, from
    the cumulative sum of resampled real inter-arrival gaps."""
    import polars as pl

    real = pl.concat([pl.read_csv(p) for p in AZURE_SRC])
    t = real["TIMESTAMP"].str.strptime(pl.Datetime("ns"), "%Y-%m-%d %H:%M:%S%.f")
    gaps = np.diff(t.sort().to_numpy().astype(np.int64))
    rng = np.random.default_rng(seed)
    ns = np.cumsum(rng.choice(gaps[gaps >= 0], rows)) + t.min().timestamp() * 0 + int(
        t.sort().to_numpy().astype(np.int64)[0])
    stamp = pl.Series(ns // 100 * 100).cast(pl.Datetime("ns")).dt.strftime("%Y-%m-%d %H:%M:%S%.9f")
    pick = pl.Series(rng.integers(0, real.height, rows))
    frame = real.drop("TIMESTAMP")[pick].with_columns(stamp.str.slice(0, 27).alias("TIMESTAMP"))
    frame.select(real.columns).write_csv(path)


def make_canonical(path: Path, rows: int, seed: int = 0) -> None:
    """The Azure rows of :func:`make_azure` as a user's own canonical requests CSV: ``ts`` as
    ISO 8601 with ``T`` and six fraction digits, no offset (a file that mixes times with and
    without one takes the checked reader, which counts both kinds), ``prompt_tokens``,
    ``completion_tokens`` and a ``model`` drawn from two names."""
    import polars as pl

    tmp = path.with_suffix(".azure.csv")
    make_azure(tmp, rows, seed)
    real = pl.read_csv(tmp)
    tmp.unlink()
    rng = np.random.default_rng(seed + 1)
    frame = pl.DataFrame({
        "ts": real["TIMESTAMP"].str.slice(0, 26).str.replace(" ", "T"),
        "prompt_tokens": real["ContextTokens"], "completion_tokens": real["GeneratedTokens"],
        "model": pl.Series(np.where(rng.random(rows) < 0.5, "llama-3-8b", "mixtral-8x7b"))})
    frame.write_csv(path)


def run_side(side: str, csv: Path, db: Path) -> dict:
    """One side in this (child) process: CPU and wall seconds of the ingest call alone."""
    if side == "headroom":
        from analytics import store
        from analytics.ingest import files as ingest

        con = store.connect(db)
        cpu, wall = time.process_time(), time.perf_counter()
        rows = ingest.ingest_files(con, [ingest.FileIn(csv, csv.name)])[0]["rows"]
    elif side == "upload":  # a browser upload: the app's service, store opened per file
        import functools

        from analytics.config import ParseOptions
        from analytics.services import data, open_store

        opener = functools.partial(open_store, db, write=True)
        con = _Closed()
        cpu, wall = time.process_time(), time.perf_counter()
        with open(csv, "rb") as up:
            rows = data.ingest_uploads(opener, [up], ParseOptions(), max_bytes=1 << 40,
                                       tmp_dir=db.parent / "uploads-tmp")[0]["rows"]
    elif side == "duckdb_requests":  # reference: DuckDB's own INSERT into the store's table
        from analytics import store

        con = store.connect(db)
        con.execute("SET enable_progress_bar = false")
        cpu, wall = time.process_time(), time.perf_counter()
        con.execute("INSERT INTO requests_tokens (dataset_id, ts, prompt_tokens, "
                    f"completion_tokens) SELECT 1, TIMESTAMP, ContextTokens, GeneratedTokens "
                    f"FROM read_csv('{csv}')")
        rows = con.execute("SELECT count(*) FROM requests").fetchone()[0]
    else:
        import duckdb

        con = duckdb.connect(str(db))
        con.execute("SET enable_progress_bar = false")
        cpu, wall = time.process_time(), time.perf_counter()
        con.execute(f"CREATE TABLE t AS SELECT * FROM read_csv('{csv}')")
        rows = con.execute("SELECT count(*) FROM t").fetchone()[0]
    con.close()  # both sides until the data is in the store file (DuckDB checkpoints at close)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"side": side, "rows": rows, "cpu_s": cpu, "wall_s": wall}


class _Closed:
    """Stands for a connection the side has already closed."""

    def close(self) -> None:
        pass


def child(args: list[str]) -> tuple[int, str, float]:
    """Run a child process; returns (peak RSS in KiB, its stdout, its CPU seconds)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=Path(__file__).resolve().parent.parent)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{args} failed with {proc.returncode}")
    return usage.ru_maxrss, out, usage.ru_utime + usage.ru_stime


def shape_file(folder: Path, shape: str, rows: int, form: str = "plain") -> Path:
    """The resampled file, written by a child process: a parent that had built 20 M rows
    itself would lend its memory to the peak RSS of every child forked after. ``form``
    ``gzip``: the plain file compressed (zlib level 6, gzip's default, as the public traces
    ship)."""
    path = folder / f"{shape}_{rows}.csv"
    if not path.exists():
        subprocess.run([sys.executable, __file__, "--make", shape, str(rows), str(path)],
                       check=True)
    if form == "plain":
        return path
    packed = path.with_name(path.name + ".gz")
    if not packed.exists():
        import gzip
        import shutil

        with open(path, "rb") as src, gzip.open(packed, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 24)
    return packed


def throughput(csv: Path, repeat: int, tmp: Path, sides=("headroom", "duckdb")) -> float:
    """Median-of-``repeat`` throughput ratio (DuckDB CPU / headroom CPU), A/B alternating;
    ``sides`` may add the ``duckdb_requests`` reference (printed, not in the ratio)."""
    runs: dict[str, list[float]] = {side: [] for side in sides}
    for i in range(repeat):
        for side in sides if i % 2 == 0 else sides[::-1]:
            db = tmp / f"{side}.duckdb"
            db.unlink(missing_ok=True)
            _, out, _ = child([sys.executable, __file__, "--child", side, str(csv), str(db)])
            runs[side].append(json.loads(out)["cpu_s"])
            db.unlink(missing_ok=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"  {csv.name}: headroom {med['headroom']:.2f} s CPU, DuckDB read_csv "
          f"{med['duckdb']:.2f} s CPU (medians of {repeat}; all: {runs})")
    if "duckdb_requests" in med:
        print(f"  reference: DuckDB's own INSERT of the file into the store's requests_tokens "
              f"{med['duckdb_requests']:.2f} s CPU = {med['duckdb'] / med['duckdb_requests']:.2f}x"
              " the throughput of its read_csv (the ceiling for any ingest into that table)")
    return med["duckdb"] / med["headroom"]


def peak_rss_mib(csv: Path, tmp: Path) -> float:
    db = tmp / "cli.duckdb"
    db.unlink(missing_ok=True)
    rss_kib, _, cpu = child([sys.executable, "-m", "analytics.cli", "--db", str(db), "ingest",
                             str(csv)])
    db.unlink(missing_ok=True)
    return rss_kib / 1024


def upload_peak_rss_mib(csv: Path, tmp: Path) -> float:
    """Peak RSS (MiB) of a child ingesting ``csv`` as a browser upload (streamed to a
    temporary file, then ingested; ``services.data.ingest_uploads``)."""
    db = tmp / "upload.duckdb"
    db.unlink(missing_ok=True)
    rss_kib, _, _ = child([sys.executable, __file__, "--child", "upload", str(csv), str(db)])
    db.unlink(missing_ok=True)
    return rss_kib / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5_000_000, help="rows of the RSS runs' file")
    ap.add_argument("--big-rows", type=int, default=20_000_000)
    ap.add_argument("--sizes", default="100000,1000000,5000000,20000000",
                    help="rows of the throughput files, comma-separated")
    ap.add_argument("--forms", default="plain,gzip", help="plain and / or gzip")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rss-only", action="store_true", help="skip the throughput runs")
    ap.add_argument("--shapes", default="burstgpt,azure,canonical",
                    help="throughput shapes, comma-separated (canonical: a user's own "
                         "canonical requests CSV)")
    ap.add_argument("--no-rss", action="store_true", help="skip the peak RSS runs")
    ap.add_argument("--child", nargs=3, metavar=("SIDE", "CSV", "DB"))
    ap.add_argument("--make", nargs=3, metavar=("SHAPE", "ROWS", "CSV"))
    args = ap.parse_args()
    if args.make:
        shape, rows, csv = args.make
        {"burstgpt": make_burstgpt, "azure": make_azure,
         "canonical": make_canonical}[shape](Path(csv), int(rows))
        return
    if args.child:
        side, csv, db = args.child
        print(json.dumps(run_side(side, Path(csv), Path(db))))
        return
    print("goal: throughput >= 0.8x DuckDB read_csv of the same file (both shapes, every size, "
          f"plain and gzip); peak RSS < 500 MiB at {args.big_rows:,} rows, flat in file size")
    print(f"load average before: {os.getloadavg()}")
    table = []
    with tempfile.TemporaryDirectory(prefix="headroom-bench-ingest-") as name:
        tmp = Path(name)
        for rows in () if args.rss_only else [int(r) for r in args.sizes.split(",")]:
            for shape in args.shapes.split(","):
                for form in args.forms.split(","):
                    csv = shape_file(tmp, shape, rows, form)
                    sides = ("headroom", "duckdb",
                             *(("duckdb_requests",) if shape == "azure" and form == "plain"
                               and rows == args.rows else ()))
                    ratio = throughput(csv, args.repeat, tmp, sides)
                    table.append((rows, shape, form, ratio))
                    print(f"  {shape} {form} {rows:,} rows: throughput {ratio:.2f}x DuckDB "
                          "read_csv (goal >= 0.8)", flush=True)
            for leftover in tmp.glob(f"*_{rows}.csv*"):  # 20 M rows take 1 GB of disk each
                leftover.unlink()
        if table:
            print("  rows        shape     form   ratio")
            for rows, shape, form, ratio in table:
                print(f"  {rows:>10,}  {shape:<8}  {form:<5}  {ratio:.2f}x")
        if args.no_rss:
            print(f"load average after: {os.getloadavg()}")
            return
        small = shape_file(tmp, "burstgpt", args.rows)
        print(f"  peak RSS, headroom ingest CLI, {args.rows:,} BurstGPT rows: "
              f"{peak_rss_mib(small, tmp):,.0f} MiB")
        print(f"  peak RSS, browser upload ({small.stat().st_size / 1e6:.0f} MB, "
              f"{args.rows:,} BurstGPT rows): {upload_peak_rss_mib(small, tmp):,.0f} MiB")
        small.unlink()
        big = shape_file(tmp, "burstgpt", args.big_rows)
        print(f"  peak RSS, headroom ingest CLI, {args.big_rows:,} BurstGPT rows: "
              f"{peak_rss_mib(big, tmp):,.0f} MiB (goal < 500, flat)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
