"""Conformal speed and agreement, and the full envelope pipeline's time, in one run.

1. Rolling conformal and ACI: headroom's own online loop vs MAPIE ``TimeSeriesRegressor``
   updated one test bin at a time (predict -> adapt_conformal_inference -> update), on the same
   real series (BurstGPT week 1, 5-minute grid), same prefit HistGradientBoosting model, same
   calibration residuals. Prints both coverages, the largest bound difference and the speed
   ratio.
2. Full pipeline (:func:`analytics.envelope.pipeline.run_envelope`: six point models, six interval
   methods, bootstrap, shift alarm) on a 61-day 5-minute grid. The real 61-day BurstGPT grid
   needs ``headroom pull burstgpt1``; offline, the grid is *reconstructed* from staged real
   aggregates: each day takes the real week-1 5-minute shape of its weekday, scaled to that
   day's real token total from the daily aggregate. It is labelled as such.

    python bench/bench_conformal.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analytics import store  # noqa: E402
from analytics.envelope import forecast, grid, metrics  # noqa: E402
from analytics.envelope import pipeline as envelope  # noqa: E402
from analytics.envelope.online import online_conformal  # noqa: E402
from analytics.ingest import files as ingest  # noqa: E402
from analytics.services.demand import demand_grid  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "burstgpt" / "derived"


def week_grid(con) -> pd.DataFrame:
    path = SHARED / "burstgpt1_week1_per_minute_tps.csv"
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    return demand_grid(con, "burstgpt1_week1_per_minute_tps", "5min")


def reconstructed_61_days(week: pd.DataFrame) -> pd.DataFrame:
    daily = pd.read_csv(SHARED / "burstgpt1_daily_requests_tokens.csv")
    shape = week["target"].to_numpy().reshape(7, 288)
    shape = shape / shape.sum(axis=1, keepdims=True)
    y = np.concatenate([shape[d % 7] * tok for d, tok in zip(daily["d"], daily["tok"],
                                                             strict=True)])
    ts = pd.date_range(week["ts"].iloc[0], periods=len(y), freq="5min")
    return pd.DataFrame({"ts": ts, "target": y})


def mapie_online(model, X, y, cal, test, alpha, gamma):
    from mapie.regression import TimeSeriesRegressor

    ref = TimeSeriesRegressor(model, method="aci", cv="prefit").fit(X[cal], y[cal])
    lo, hi = np.empty(len(test)), np.empty(len(test))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, i in enumerate(test):
            _, pis = ref.predict(X[i:i + 1], confidence_level=1 - alpha,
                                 allow_infinite_bounds=True)
            lo[k], hi[k] = pis[0, 0, 0], pis[0, 1, 0]
            if gamma:
                ref.adapt_conformal_inference(X[i:i + 1], y[i:i + 1], gamma=gamma,
                                              confidence_level=1 - alpha)
            ref.update(X[i:i + 1], y[i:i + 1])
    return lo, hi


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    con = store.connect(":memory:")
    week = week_grid(con)
    y = week["target"].to_numpy()
    f = forecast.make_features(y, week["ts"], 300)
    s = grid.chronological_split(len(y), 300)
    preds, fitted = forecast.point_forecasts(y, f, np.arange(s.fit.start, s.fit.stop),
                                             models=("hgb",))
    cal = np.arange(s.calibration.start, s.calibration.stop)
    test = np.arange(s.test.start, s.test.stop)
    yhat = preds["hgb"]
    print(f"1. online conformal on real BurstGPT week 1 (5 min): {len(cal)} calibration bins, "
          f"{len(test)} test bins, alpha 0.1, {args.repeat} runs each")
    for label, gamma in (("rolling", 0.0), ("ACI g=0.005", 0.005)):
        (own, t_own) = timed(lambda g=gamma: online_conformal(
            y[test], yhat[test], y[cal] - yhat[cal], 0.1, g), args.repeat)
        (ref, t_ref) = timed(lambda g=gamma: mapie_online(fitted["hgb"], f.X, y, cal, test,
                                                          0.1, g), args.repeat)
        diff = max(np.abs(own[0] - ref[0]).max(), np.abs(own[1] - ref[1]).max())
        m_own, m_ref = statistics.median(t_own), statistics.median(t_ref)
        print(f"  {label:12s} coverage own {metrics.coverage(y[test], own[0], own[1]):.4f} "
              f"MAPIE {metrics.coverage(y[test], ref[0], ref[1]):.4f}  max |bound diff| "
              f"{diff:.3g}  time own {m_own * 1e3:.1f} ms, MAPIE {m_ref * 1e3:.0f} ms  "
              f"-> MAPIE / own = {m_ref / m_own:.0f}x")

    big = reconstructed_61_days(week)
    print(f"2. full envelope pipeline on a 61-day 5-minute grid ({len(big):,} bins; "
          "RECONSTRUCTED from real BurstGPT week-1 shape x real daily totals)")
    res, t_full = timed(lambda: envelope.run_envelope(big, 300), args.repeat)
    doc = envelope.to_json(res)
    print(f"  split {doc['split']['mode']} "
          f"{doc['split']['fit']['bins']}/{doc['split']['calibration']['bins']}/"
          f"{doc['split']['test']['bins']} bins; median {statistics.median(t_full):.1f} s "
          f"(min {min(t_full):.1f}, max {max(t_full):.1f})")
    for m in ("rolling", "aci"):
        print(f"  {m} coverage {doc['intervals'][m]['coverage']:.4f}, infinite intervals "
              f"{doc['intervals'][m]['infinite_bins']}, mean finite width "
              f"{doc['intervals'][m]['mean_width']:,.0f}")
    print(f"  hgb WAPE {doc['point']['hgb']['wape']:.2%} vs daily seasonal "
          f"{doc['point']['seasonal_daily']['wape']:.2%}")


if __name__ == "__main__":
    main()
