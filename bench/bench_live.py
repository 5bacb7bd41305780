"""The live envelope's cost per bin (issue 29: goal < 50 ms CPU per model per bin) and its memory
over 2,016 bins (a week of 5-minute bins: flat, not growing with the bins seen).

History: the first 5 days of the real BurstGPT week 1 (5-minute grid). Live: the week's 7 days
replayed twice after it on the same clock (2,016 bins), one :meth:`LiveEnvelope.step` per bin.
Baseline in the same run: the offline road on the same bins (one ``predict`` over every feature
row, then :func:`analytics.envelope.online.online_conformal`), per bin. CPU time is process CPU
(``time.process_time``); the host is shared, so the load is printed beside it.

    python bench/bench_live.py
"""

from __future__ import annotations

import os
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analytics import store  # noqa: E402
from analytics.envelope import forecast  # noqa: E402
from analytics.envelope.online import online_conformal, residuals  # noqa: E402
from analytics.ingest import files as ingest  # noqa: E402
from analytics.live.envelope import LiveEnvelope  # noqa: E402
from analytics.services.demand import demand_grid  # noqa: E402

WEEK = ROOT.parent / "shared" / "data" / "burstgpt" / "derived" / "burstgpt1_week1_per_minute_tps.csv"


def main() -> None:
    con = store.connect(":memory:")
    ingest.ingest_files(con, [ingest.FileIn(WEEK, WEEK.name)])
    week = demand_grid(con, "burstgpt1_week1_per_minute_tps", "5min")
    week["ts"] = pd.to_datetime(week["ts"])
    hist = week.iloc[:5 * 288]
    live_y = week["target"].to_numpy()  # the week again, after the history: 2,016 bins
    live_ts = hist["ts"].iloc[-1] + pd.to_timedelta(300 * np.arange(1, len(live_y) + 1), "s")
    env = LiveEnvelope(hist, 300)
    tracemalloc.start()
    marks, cpu = {}, []
    with forecast.single_threaded():  # as the live service holds it
        for i, (t, y) in enumerate(zip(live_ts, live_y, strict=True)):
            c = time.process_time()
            env.step(t, float(y))
            cpu.append(time.process_time() - c)
            if i + 1 in (288, 2016):
                marks[i + 1] = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    # the offline road on the same bins: features of the whole series, one predict, ACI
    c = time.process_time()
    y_all = np.concatenate([hist["target"].to_numpy(), live_y])
    feats = forecast.make_features(y_all, pd.concat([hist["ts"], pd.Series(live_ts)]), 300, 1)
    rows = np.arange(len(hist), len(y_all))
    X = feats.X[:, [feats.names.index(c) for c in env.names]]  # the fit's features
    with forecast.single_threaded():
        yhat = np.maximum(env.model.predict(X[rows]), 0)
    n = len(hist)
    cal = np.arange(n - round(n * 0.2), n)
    with forecast.single_threaded():
        init = residuals(y_all[cal], env.model.predict(X[cal]))
    online_conformal(live_y, yhat, init, 0.1, 0.005, floor=0.0)
    offline = (time.process_time() - c) / len(live_y)
    cpu = np.array(cpu) * 1e3
    print(f"live envelope, {len(live_y):,} bins (load {os.getloadavg()[0]:.1f}): CPU per bin "
          f"median {np.median(cpu):.2f} ms, p95 {np.percentile(cpu, 95):.2f} ms, max "
          f"{cpu.max():.1f} ms (goal < 50 ms); offline road {offline * 1e3:.3f} ms per bin "
          f"-> live / offline = {np.median(cpu) / (offline * 1e3):.0f}x")
    print(f"traced memory after 288 bins {marks[288] / 2**20:.2f} MiB, after 2,016 bins "
          f"{marks[2016] / 2**20:.2f} MiB (the history and the bins it keeps for features)")
    _store_cost(live_ts, live_y)
    c = time.process_time()
    LiveEnvelope(week, 300)  # what a refit costs: a fit on the history and the live bins
    print(f"a refit on {len(week):,} bins: {(time.process_time() - c) * 1e3:.0f} ms CPU")


def _store_cost(live_ts, live_y) -> None:
    """Storing each bin as ``--follow`` does (one transaction per poll, a bin per poll) on a
    DuckDB file, against a bare DuckDB INSERT of the same row in the same run."""
    import tempfile

    import duckdb

    from analytics.store.live import BIN_COLUMNS

    with tempfile.TemporaryDirectory() as tmp:
        con = store.connect(Path(tmp) / "live.duckdb")
        store.start_live_run(con, "bench", {"model": "m"}, live_ts[0].to_pydatetime())
        rows = [{"ts": t.isoformat(), "demand": float(y), **{k: None for k in BIN_COLUMNS
                                                             if k != "demand"}}
                for t, y in zip(live_ts, live_y, strict=True)]
        each = []
        for r in rows:
            c = time.process_time()
            store.save_live_bins(con, "bench", [r])
            each.append(time.process_time() - c)
        ours = float(np.median(each))
        first, last = float(np.median(each[:100])), float(np.median(each[-100:]))
        con.close()
        raw = duckdb.connect(str(Path(tmp) / "raw.duckdb"))
        raw.execute("CREATE TABLE b (ts TIMESTAMP PRIMARY KEY, demand DOUBLE)")
        c = time.process_time()
        for r in rows:
            raw.execute("INSERT INTO b VALUES (?, ?) ON CONFLICT DO NOTHING",
                        [r["ts"], r["demand"]])
        bare = (time.process_time() - c) / len(rows)
        raw.close()
    print(f"storing a bin (save_live_bins, its own transaction, the bin appended to the run's "
          f"series dataset), median over {len(rows):,} bins: {ours * 1e3:.2f} ms CPU (first 100 "
          f"{first * 1e3:.2f} ms, last 100 {last * 1e3:.2f} ms); a bare DuckDB INSERT of "
          f"(ts, demand): {bare * 1e3:.2f} ms -> {ours / bare:.1f}x")


if __name__ == "__main__":
    main()
