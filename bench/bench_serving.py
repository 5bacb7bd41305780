"""Simulated requests per second of wall time on the real Azure conv trace (19,366 requests).

Baseline in the same run: the max-clock policy (fixed clock, no controller); the ratio says what
Festina's controllers (Eq. 9 clock, SM shares, placement, consolidation) cost per request.

    python bench/bench_serving.py [--window-s S]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analytics import ingest, serving, store  # noqa: E402
from analytics import serving_profiles as sp  # noqa: E402

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
FILES = ("azure_llm/AzureLLMInferenceTrace_conv.csv",
         "ml_energy/leaderboard_v3/all_task_configurations_flat.csv",
         "llm_inference_bench_argonne/Fig_21__all_results_TTFT.csv")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--window-s", type=float, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        con = store.connect(Path(tmp) / "bench.duckdb")
        for rel in FILES:
            ingest.ingest_files(con, [ingest.FileIn(DATA / rel, Path(rel).name)])
        profs = sp.profiles_from_bench(store.bench_runs(con), "H100-80GB")
        trace = serving.trace_arrays(store.dataset_rows(con, "AzureLLMInferenceTrace_conv"),
                                     args.window_s)
        con.close()
    params = serving.ServingParams(window_s=args.window_s)
    rates = {}
    for pol in ("max_clock", "static_dvfs", "stage2", "stage3", "stage4", "festina"):
        t0 = time.perf_counter()
        serving.simulate(trace, profs, params, (pol,))
        wall = time.perf_counter() - t0
        runs = 2 if pol == "static_dvfs" else 1  # static DVFS replays max-clock first
        rates[pol] = len(trace) * runs / wall
        print(f"{pol:12s} {len(trace):,} requests x {runs} runs in {wall:6.2f} s -> "
              f"{rates[pol]:8.0f} simulated requests / s")
    print(f"festina / max_clock throughput ratio: {rates['festina'] / rates['max_clock']:.2f}")


if __name__ == "__main__":
    main()
