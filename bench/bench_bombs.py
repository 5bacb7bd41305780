"""Memory under files that are small on disk and huge once read, and under a big plain upload
(issue 34, items 3, 4 and 6), in one run.

Inputs (written to a temporary folder, never into the repo):
* a Parquet "bomb": ``--parquet-rows`` (default 150 M) identical canonical request rows, a few
  MB on disk (zstd, written a row group at a time);
* a gzip BurstGPT trace: ``--gzip-rows`` (default 45 M) real BurstGPT rows resampled
  (``bench_ingest.make_burstgpt``), about 2 GB of text, about 250 MB compressed;
* a plain CSV of ``--plain-rows`` (default 7.5 M) such rows, about 330 MB, for the plain
  uploader.

Measured:
1. Peak RSS (``ru_maxrss`` of the child) of ``headroom ingest`` on the Parquet bomb and on the
   gzip trace, each against a baseline in the same run: what the reader that holds a file whole
   does with it (``polars.read_parquet`` of the bomb; ``polars.read_csv`` of the gzip trace), and
   DuckDB's own ``CREATE TABLE AS SELECT * FROM read_csv`` of the gzip trace. Goal: headroom's
   peak flat (< 600 MiB) where the whole-file reader's grows with the file.
2. The served app (``streamlit run serve.py``, RSS sampled by ``psutil`` every 50 ms): the
   plain CSV PUT to Streamlit's upload endpoint (refused, 413, before any byte is read) and the
   Parquet bomb through the streamed route then ingested by the Data page's code path
   (refused from its footer). Goal: each adds < 20 MiB to the server's RSS.

    python bench/bench_bombs.py [--parquet-rows 150000000] [--gzip-rows 45000000]
                                [--plain-rows 7500000]
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(Path(__file__).resolve().parent)]


def mib(n: float) -> float:
    return n / 2**20


#: Run first in every measured child: at exit it writes its own peak RSS (``VmHWM``, which
#: starts afresh at ``exec``; ``ru_maxrss`` would count this bench's own memory, which a forked
#: child holds until it execs) to the file named by ``$BENCH_PEAK``.
_PEAK = """import atexit, os
def _peak():
    with open("/proc/self/status") as fh:
        kb = next(int(l.split()[1]) for l in fh if l.startswith("VmHWM"))
    with open(os.environ["BENCH_PEAK"], "w") as out:
        out.write(str(kb))
atexit.register(_peak)
"""


def child_peak(code: str) -> tuple[float, int, str]:
    """Run ``python -c code`` in a child; its peak RSS (MiB), exit code and last stderr line."""
    with tempfile.NamedTemporaryFile(suffix=".peak") as peak:
        proc = subprocess.run([sys.executable, "-c", _PEAK + code], cwd=ROOT, text=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env={**os.environ, "BENCH_PEAK": peak.name})
        kb = int(Path(peak.name).read_text() or 0)
    err = proc.stderr.strip().splitlines()
    return kb / 1024, proc.returncode, (err[-1] if err else "")


def cli_peak(db: Path, path: Path) -> tuple[float, int, str]:
    return child_peak("import sys\nfrom analytics.cli import main\n"
                      f"code = main(['--db', {str(db)!r}, 'ingest', {str(path)!r}])\n"
                      "sys.stdout.flush()\nsys.exit(code)")


def served_side(folder: Path, plain: Path, bomb: Path, packed: Path) -> dict:
    """Server RSS growth (MiB) for the plain upload refused at the endpoint, the Parquet bomb
    streamed and handed to the ingest (refused), and the gzip trace streamed and ingested."""
    from bench_upload_memory import Server
    from harness import browser_page, wait_settled

    server = Server(folder)
    out = {}
    try:
        with browser_page() as (sync_api, page):
            page.goto(server.url)
            page.get_by_text("No data yet").wait_for()
            wait_settled(page)
            time.sleep(1)
            before, t0 = server.rss(), time.time()
            conn = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
            with open(plain, "rb") as body:
                conn.request("PUT", "/_stcore/upload_file/x/y", body=body,
                             headers={"Content-Length": str(plain.stat().st_size)})
                status = conn.getresponse().status
            out["plain_status"] = status
            out["plain_growth"] = mib(server.peak(t0) - before)
            before, t0 = server.rss(), time.time()
            page.get_by_test_id("hr-large-upload-input").set_input_files(str(bomb))
            page.get_by_text("rejected").first.wait_for()
            wait_settled(page)
            out["bomb_growth"] = mib(server.peak(t0) - before)
            out["bomb_refusal"] = page.get_by_text("rejected").first.inner_text()[:160]
            before, t0 = server.rss(), time.time()
            page.get_by_test_id("hr-large-upload-input").set_input_files(str(packed))
            sync_api.expect(page.locator('[data-testid="stDataFrame"]').filter(
                has_text="BurstGPT_big").first).to_contain_text("BurstGPT_big")
            wait_settled(page)
            out["gzip_peak_growth"] = mib(server.peak(t0) - before)
            out["gzip_kept_after"] = mib(server.rss() - before)
            out["gzip_s"] = round(time.time() - t0, 1)
    finally:
        server.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parquet-rows", type=int, default=150_000_000)
    parser.add_argument("--gzip-rows", type=int, default=45_000_000)
    parser.add_argument("--plain-rows", type=int, default=7_500_000)
    parser.add_argument("--no-browser", action="store_true", help="skip the served-app part")
    args = parser.parse_args()
    from bench_ingest import make_burstgpt
    from harness import constant_parquet

    os.environ.setdefault("HEADROOM_BROWSER_WAIT_MS", "600000")
    print("goal: headroom's peak RSS flat (< 600 MiB) on both bombs; the served app + < 20 MiB "
          "for the refused plain upload and the refused Parquet bomb")
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="bench-bombs-") as tmp:
        tmp = Path(tmp)
        bomb = tmp / "bomb.parquet"
        constant_parquet(bomb, args.parquet_rows)
        print(f"parquet bomb: {bomb.stat().st_size / 1e6:.1f} MB on disk, "
              f"{args.parquet_rows:,} rows")
        peak, code, err = cli_peak(tmp / "a.duckdb", bomb)
        print(f"  headroom ingest: peak RSS {peak:,.0f} MiB, exit {code}: {err[:150]}")
        base, code, _ = child_peak(f"import polars as pl; pl.read_parquet({str(bomb)!r})")
        print(f"  baseline polars.read_parquet: peak RSS {base:,.0f} MiB (exit {code}); "
              f"ratio {base / peak:,.1f}x")

        plain = tmp / "BurstGPT_plain.csv"
        make_burstgpt(plain, args.gzip_rows)
        packed = tmp / "BurstGPT_big.csv.gz"
        with open(plain, "rb") as src, gzip.open(packed, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 24)
        print(f"gzip trace: {packed.stat().st_size / 1e6:,.0f} MB compressed, "
              f"{plain.stat().st_size / 1e6:,.0f} MB of text, {args.gzip_rows:,} rows")
        plain.unlink()
        t0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak, code, err = cli_peak(tmp / "b.duckdb", packed)
        cpu = sum(getattr(resource.getrusage(resource.RUSAGE_CHILDREN), f) - getattr(t0, f)
                  for f in ("ru_utime", "ru_stime"))
        print(f"  headroom ingest: peak RSS {peak:,.0f} MiB, exit {code}, {cpu:,.1f} s CPU: "
              f"{err[:100]}")
        duck, code, _ = child_peak(
            "import duckdb; c = duckdb.connect(); c.execute(\"CREATE TABLE t AS SELECT * FROM "
            f"read_csv('{packed}')\")")
        print(f"  baseline DuckDB CREATE TABLE AS read_csv: peak RSS {duck:,.0f} MiB")
        whole, code, _ = child_peak(f"import polars as pl; pl.read_csv({str(packed)!r})")
        print(f"  baseline polars.read_csv (the reader that holds a file whole): peak RSS "
              f"{whole:,.0f} MiB; ratio {whole / peak:,.1f}x")

        upload = tmp / "BurstGPT_upload.csv"
        make_burstgpt(upload, args.plain_rows)
        print(f"plain upload: {upload.stat().st_size / 1e6:,.0f} MB")
        if not args.no_browser:
            got = served_side(tmp / "served", upload, bomb, packed)
            print("  served app (RSS growth in MiB): " + json.dumps(got))
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
