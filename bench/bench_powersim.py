"""Power co-simulation speed: the heapq engine of ``analytics.power`` against a SimPy model of
the same batch scenario, in one run, and the wall time of a full 7-day, 1-minute scenario.

Batch scenario (both engines): a seeded job list (Poisson arrivals, 1/2/4/8 GPUs, lognormal
runtimes, offered load ~85 % of a 256-GPU pool), strict FCFS without backfilling or
checkpointing on a constant pool. SimPy's ``Container`` serves gets in order, which is the same
policy, so both engines must produce the same start times (checked). Events = arrivals + job
ends, counted the same way on both sides; the ratio printed is heapq events/s over SimPy's.

Full scenario: MIT SuperCloud jobs + BurstGPT week-1 per-minute tokens when the staged data is
found (``HEADROOM_SHARED_DATA`` or ``../shared/data``), else a synthetic job trace and the
labelled synthetic inference envelope; 7 measured days + 2 warm-up days at 1-minute
resolution, FCFS + backfilling, 60-minute checkpoints, inference share 0.5, utilisation 0.8.

    python bench/bench_powersim.py [--jobs 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analytics import power as powersim
from analytics import store  # noqa: E402
from analytics.ingest import files as ingest
from analytics.services import power as power_service  # noqa: E402

CAPACITY = 256


def job_list(n: int, seed: int = 0) -> powersim.JobArrays:
    rng = np.random.default_rng(seed)
    gpus = rng.choice([1, 2, 4, 8], n, p=[0.6, 0.2, 0.12, 0.08])
    runtime = np.maximum(rng.lognormal(np.log(1800), 1.0, n), 1.0)
    rate = 0.85 * CAPACITY / float((gpus * runtime).mean())  # jobs per second
    submit = np.cumsum(rng.exponential(1 / rate, n))
    return powersim.JobArrays.build(submit, gpus * 1000, runtime, np.full(n, 300.0))


def run_heapq(jobs: powersim.JobArrays) -> tuple[float, int, np.ndarray]:
    horizon = float(jobs.submit_s[-1] + jobs.runtime_s.max() + 1)
    t = time.perf_counter()
    res = powersim.simulate(jobs, powersim.SimParams(CAPACITY, "fcfs", False, None), horizon)
    return time.perf_counter() - t, res.n_events, res.jobs["first_start_s"].to_numpy()


def run_simpy(jobs: powersim.JobArrays) -> tuple[float, int, np.ndarray]:
    import simpy

    n = len(jobs)
    starts = np.full(n, np.nan)
    count = [0]

    def job(env, pool, j):
        count[0] += 1  # arrival
        need = int(jobs.gpu_milli[j] // 1000)
        yield pool.get(need)
        starts[j] = env.now
        yield env.timeout(float(jobs.runtime_s[j]))
        yield pool.put(need)
        count[0] += 1  # end

    def source(env, pool):
        last = 0.0
        for j in range(n):
            yield env.timeout(float(jobs.submit_s[j]) - last)
            last = float(jobs.submit_s[j])
            env.process(job(env, pool, j))

    t = time.perf_counter()
    env = simpy.Environment()
    pool = simpy.Container(env, capacity=CAPACITY, init=CAPACITY)
    env.process(source(env, pool))
    env.run()
    return time.perf_counter() - t, count[0], starts


def full_scenario() -> tuple[float, str, dict]:
    shared = Path(os.environ.get("HEADROOM_SHARED_DATA",
                                 Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    rng = np.random.default_rng(0)
    mit = shared / "mit_supercloud" / "slurm-log-queueing-clean.csv"
    burst = shared / "burstgpt" / "derived" / "burstgpt1_week1_per_minute_tps.csv"
    if mit.exists() and burst.exists():
        con = store.connect(":memory:")
        ingest.ingest_files(con, [ingest.FileIn(p, p.name) for p in (mit, burst)])
        inputs = power_service.load_inputs(con, mit.stem, burst.stem, seed=0)
        con.close()
        label = "MIT SuperCloud jobs + BurstGPT week-1 per-minute tokens"
    else:
        n = 3000
        t0 = pd.Timestamp("2024-01-01")
        jobs = pd.DataFrame({
            "submit_ts": t0 + pd.to_timedelta(np.sort(rng.uniform(0, 30 * 86400, n)), unit="s"),
            "gpu_milli": rng.choice([1000, 2000, 8000], n, p=[0.7, 0.2, 0.1]),
            "runtime_s": rng.lognormal(np.log(3600), 1.2, n)})
        inputs = powersim.prepare_inputs(jobs, None, rng, "synthetic jobs")
        label = "SYNTHETIC jobs + SYNTHETIC inference envelope (staged data not found)"
    scenario = powersim.Scenario(inference_share=0.5, utilization=0.8, days=7, warmup_days=2)
    t = time.perf_counter()
    res = powersim.run_scenario(inputs, scenario, np.random.default_rng(1))
    return time.perf_counter() - t, label, res.metrics


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    jobs = job_list(args.jobs)
    h_times, s_times = [], []
    for _ in range(args.repeat):
        h_wall, h_events, h_starts = run_heapq(jobs)
        s_wall, s_events, s_starts = run_simpy(jobs)
        h_times.append(h_wall)
        s_times.append(s_wall)
    same = bool(np.allclose(h_starts, s_starts, rtol=0, atol=1e-6))
    h_med, s_med = statistics.median(h_times), statistics.median(s_times)
    print(f"batch scenario: {args.jobs:,} jobs, {CAPACITY} GPUs, strict FCFS, "
          f"median of {args.repeat}")
    print(f"  heapq engine: {h_events:,} events in {h_med:.3f} s = {h_events / h_med:,.0f} events/s")
    print(f"  SimPy 4     : {s_events:,} events in {s_med:.3f} s = {s_events / s_med:,.0f} events/s")
    print(f"  ratio heapq / SimPy events/s: {(h_events / h_med) / (s_events / s_med):.2f}x; "
          f"same start times: {same}")
    wall, label, metrics = full_scenario()
    print(f"7-day 1-minute hybrid scenario ({label}; share 0.5, U 0.8, 256 GPUs, 2 warm-up "
          f"days): {wall:.2f} s wall, {metrics['events']:,} events, CV {metrics['cv']:.3f}, "
          f"p50 ramps {metrics['ramp_p50']}")


if __name__ == "__main__":
    main()
