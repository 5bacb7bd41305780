"""Simulated requests per second of wall time on the real Azure conv trace (19,366 requests).

Baseline in the same run: the max-clock policy (fixed clock, no controller); the ratio says what
Festina's controllers (Eq. 9 clock, SM shares, placement, consolidation) cost per request.

Second figure: the global scheduler's offline lookup table against evaluating the profile model
for every candidate (the work the table replaces: latency and power over the clock grid), per
placement query, for the DVFS model and for an uploaded measured profile (scipy griddata).

    python bench/bench_serving.py [--window-s S]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analytics import serving, store  # noqa: E402
from analytics.ingest import files as ingest  # noqa: E402

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
        profs = serving.profiles_from_bench(store.bench_runs(con), "H100-80GB")
        trace = serving.trace_arrays(store.dataset_rows(con, "AzureLLMInferenceTrace_conv"),
                                     args.window_s)
        con.close()
    params = serving.ServingParams(window_s=args.window_s)
    rates = {}
    for pol in ("max_clock", "static_dvfs", "stage2", "stage3", "stage4", "festina"):
        t0 = time.perf_counter()
        comp = serving.simulate(trace, profs, params, (pol,))
        wall = time.perf_counter() - t0
        # static DVFS replays max-clock first and may re-provision: count every pass
        runs = sum(r.sim_runs for r in comp.results.values())
        rates[pol] = len(trace) * runs / wall
        print(f"{pol:12s} {len(trace):,} requests x {runs} runs in {wall:6.2f} s -> "
              f"{rates[pol]:8.0f} simulated requests / s")
    print(f"festina / max_clock throughput ratio: {rates['festina'] / rates['max_clock']:.2f}")
    measured = serving.apply_measured(profs, serving.parse_measured_profiles(
        b"model,gpu,phase,sm_share,clock_mhz,latency_ms,power_w\n"
        b"*,H100,decode,1,1980,10,600\n*,H100,decode,1,990,12,300\n"
        b"*,H100,decode,0.5,1980,16,420\n*,H100,decode,0.5,990,20,240\n"
        b"*,H100,prefill,1,1980,100,690\n*,H100,prefill,1,990,200,320\n"
        b"*,H100,prefill,0.5,1980,190,430\n*,H100,prefill,0.5,990,380,250\n"))
    for label, pr in (("DVFS model", profs), ("measured profile", measured)):
        lookup_vs_model(trace, pr, params, label)


def _direct_offer(sim, j: int, rid: int, share: float) -> float:
    """What one lookup answers, computed from the profile model: TTFT / ITL / power over the
    clock grid at ``share``, then the lowest clock meeting both SLOs and the energy there."""
    prof, kind, f = sim.slots[j], sim.kind, sim.grid.clocks
    pf = serving.prefill_time_s(prof, kind, 1.0, f, share)
    itl = serving.decode_itl_s(prof, kind, 1, f, share)
    ok = np.flatnonzero((sim.prompt[rid] * pf <= sim.ttft_s) & (itl <= sim.tbt_s))
    c = int(ok[0]) if ok.size else len(f) - 1
    e_p = float(serving.dynamic_power_w(prof, kind, "prefill", 1, f[c], share, sim.dvfs)) \
        * sim.prompt[rid] * pf[c]
    e_d = float(serving.dynamic_power_w(prof, kind, "decode", 1, f[c], share, sim.dvfs)) * itl[c]
    return e_p + e_d * (sim.pred[rid] - 1)  # the predicted length, as the lookup reads it


def lookup_vs_model(trace, profiles, params, label: str, n: int = 3000) -> None:
    gpu = serving.GPU_DVFS[params.gpu]
    sim = serving.ServingEngine(trace, np.zeros(len(trace), np.int64),
                                serving.model_slots(profiles, params.n_models), gpu,
                                serving.resolve_gamma(params, profiles, gpu)[0],
                                serving.get_policy("festina"))
    sim.power_on(0, 0.0)
    rids = np.arange(n) % len(trace)
    t0 = time.perf_counter()
    for rid in rids:
        sim.placement.offer(0, int(rid) % params.n_models, int(rid), 0.0)
    t_lut = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for rid in rids:
        _direct_offer(sim, int(rid) % params.n_models, int(rid), 1.0)
    t_dir = (time.perf_counter() - t0) / n
    print(f"placement query, {label}: lookup {t_lut * 1e6:7.1f} us, profile model "
          f"{t_dir * 1e6:8.1f} us -> lookup is {t_dir / t_lut:5.1f}x faster")


if __name__ == "__main__":
    main()
