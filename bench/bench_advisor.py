"""Launch advisor speed (issue 15): CPU per ``advise`` call with the cost model fitted, and the
``headroom advise`` process cold (fit, cache miss) against warm (stored fit, cache hit).

Goal: < 50 ms CPU per advise call; the CLI reuses a stored fit instead of refitting.

Store: the staged real benchmarks and job history the advisor tests use (ML.ENERGY v2 / v3,
Argonne, MIT SuperCloud Slurm log). Request: Llama-3.1-405B, 64 x (1024 + 512) tokens, TTFT
and ITL SLOs (every term of the utility is exercised), 264 arms (11 GPU kinds x 4 TP x 6
precisions).

Baseline in the same run (no pre-change code ships): :func:`naive_advise` below is the per-arm
pandas path the product used before issue 15 (a pandas filter of the priors and waits tables per
arm, ``iterrows``, a scalar normal tail per arm, the scikit-learn ``predict`` on a DataFrame),
scored on the same fitted model and context; its output must equal the product's (checked).
Calls alternate A/B; CPU time is ``time.process_time()``; subprocess CPU is
``resource.getrusage(RUSAGE_CHILDREN)`` (user + sys).

    python bench/bench_advisor.py [--calls 50] [--warm 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analytics import store  # noqa: E402
from analytics.advisor import decide  # noqa: E402
from analytics.advisor import model as cm  # noqa: E402
from analytics.ingest import files as ingest  # noqa: E402
from analytics.services import advisor  # noqa: E402

DATA = Path(os.environ.get("HEADROOM_SHARED_DATA") or ROOT.parent / "shared" / "data")
FILES = ("ml_energy/leaderboard_v2/llm_text_generation_runs.csv",
         "ml_energy/leaderboard_v3/all_task_configurations_flat.csv",
         "llm_inference_bench_argonne/All_results.csv",
         "llm_inference_bench_argonne/Fig_16_a_b__power_results.csv",
         "llm_inference_bench_argonne/Fig_22__all_results_TTFT_ITL.csv",
         "mit_supercloud/slurm-log-queueing-clean.csv")
REQUEST = decide.Request("meta-llama/Llama-3.1-405B-Instruct", 405.0, 64.0, 1024.0, 512.0,
                         ttft_slo_ms=500.0, itl_slo_ms=50.0)
CLI_ARGS = ["advise", "--model", REQUEST.model, "--params-b", "405", "--concurrency", "64",
            "--in-len", "1024", "--out-len", "512", "--ttft-slo-ms", "500", "--itl-slo-ms", "50"]
GOAL_MS = 50.0


# --------------------------------------------------------------------- the pre-change path
def naive_success_for(priors: pd.DataFrame, n_gpus: int, hw: str) -> float | None:
    """Launch success of one arm by filtering the priors frame (pre-change): the (kind, count)
    row, else the count pooled over kinds, else the prior mean."""
    if priors is None or priors.empty:
        return None
    own = priors[(priors["n_gpus"] == n_gpus) & (priors["gpu_kind"] == hw)]
    if not own.empty:
        return float(own["posterior_mean"].iloc[0])
    hit = priors[(priors["n_gpus"] == n_gpus)]
    if not hit.empty:
        return float(np.average(hit["posterior_mean"], weights=hit["trials"]))
    return float(priors["prior_mean"].iloc[0])


def naive_wait_h(waits: pd.DataFrame, n_gpus: int) -> float:
    """Median queue wait of one arm by filtering the waits frame (pre-change)."""
    if waits is None or waits.empty:
        return 0.0
    hit = waits[waits["n_gpus"] == n_gpus]
    if hit.empty:
        hit = waits.iloc[[int(np.argmin(np.abs(waits["n_gpus"] - n_gpus)))]]
    return float(hit["median_wait_h"].iloc[0])


def naive_predict(cost: cm.CostModel, rows: pd.DataFrame) -> pd.DataFrame:
    """Quantiles through the scikit-learn wrapper on a DataFrame, one column at a time."""
    df = rows.copy()
    X = cm.featurize(df, cost.schema)
    out = pd.DataFrame(index=df.index)
    for target, qs in cost.models.items():
        pred = np.column_stack([qs[q].predict(X) for q in cm.QUANTILES])
        pred.sort(axis=1)
        pred[:, 0] -= cost.offsets[target]
        pred[:, 2] += cost.offsets[target]
        for k, q in enumerate(cm.QUANTILES):
            out[f"{target}_q{int(q * 100)}"] = np.exp(pred[:, k])
    return out


def naive_p_exceed(q10: float, q50: float, q90: float, slo: float) -> float:
    if not all(np.isfinite([q10, q50, q90])) or q50 <= 0:
        return float("nan")
    sigma = max((math.log(q90) - math.log(q10)) / (2 * stats.norm.ppf(0.9)), 1e-9)
    return float(stats.norm.sf((math.log(slo) - math.log(q50)) / sigma))


def naive_utility(thr, power_w, n_gpus, hw, occupancy, p_slo, p_launch, wait_h, u) -> dict:
    price = u.prices_usd_per_gpu_h.get(hw)
    spec = decide.hardware.CATALOG.get(hw)
    if power_w is None or not np.isfinite(power_w):
        power_w = n_gpus * spec.tdp_w if spec and spec.tdp_w else 0.0
    kvf = 1.0 if occupancy is None or not np.isfinite(occupancy) else \
        max(0.0, 1.0 - u.kv_slope * max(0.0, min(occupancy, 1.0) - u.kv_knee))
    p_slo = 0.0 if not np.isfinite(p_slo) else p_slo
    value = u.value_per_token_usd * thr * kvf * (1 - p_slo) * 3600 * u.runtime_h
    served = thr * kvf * (1 - p_slo) * 3600 * u.runtime_h
    if price is None:
        return {"value_usd": value, "compute_usd": float("nan"), "queue_usd": float("nan"),
                "failure_usd": float("nan"), "kv_factor": kvf, "served_tokens": served,
                "utility": float("nan")}
    rate = n_gpus * price + power_w / 1000 * u.usd_per_kwh
    compute, queue = rate * u.runtime_h, u.queue_weight * wait_h * rate
    failure = (1 - p_launch) * u.restart_h * rate
    return {"value_usd": value, "compute_usd": compute, "queue_usd": queue,
            "failure_usd": failure, "kv_factor": kvf, "served_tokens": served,
            "utility": value - compute - queue - failure}


def naive_advise(cost, req, u, ctx) -> pd.DataFrame:
    """The pre-change ``decide.advise``: one pandas row and two pandas filters per arm (the
    ranking and row order of the scored arms are the product's, :func:`decide.ranked`)."""
    grid = decide._arm_grid(req, None)
    preds = naive_predict(cost, grid)
    rows = []
    for i, arm in grid.iterrows():
        a = arm.to_dict()
        mem = decide.memory_check(req, a, u)
        axis = cm.outside(cost.envelope, a)
        p = preds.loc[i]
        p_slo = 0.0
        for slo, tgt in ((req.ttft_slo_ms, "ttft_ms"), (req.itl_slo_ms, "itl_ms")):
            if slo and f"{tgt}_q50" in p:
                pe = naive_p_exceed(p[f"{tgt}_q10"], p[f"{tgt}_q50"], p[f"{tgt}_q90"], slo)
                p_slo = 1 - (1 - p_slo) * (1 - (0.0 if np.isnan(pe) else pe))
        s = naive_success_for(ctx.priors, a["n_gpus"], a["hardware"])
        p_launch = u.default_launch_success if s is None else s
        wait = naive_wait_h(ctx.waits, a["n_gpus"])
        terms = naive_utility(p.get("throughput_tok_s_q50", float("nan")), p.get("power_w_q50"),
                              a["tp"], a["hardware"], mem["occupancy"], p_slo, p_launch, wait, u)
        rows.append({**{k: a[k] for k in ("hardware", "tp", "precision", "n_gpus")},
                     "feasible": mem["feasible"], "why_infeasible": mem["why"],
                     "abstain": axis is not None, "abstain_axis": axis or "",
                     "priced": a["hardware"] in u.prices_usd_per_gpu_h,
                     "weights_gb": mem["weights_gb"], "kv_gb": mem["kv_gb"],
                     "occupancy": mem["occupancy"],
                     **{k: mem[k] for k in decide._KV_COLUMNS}, **p.to_dict(), "p_slo": p_slo,
                     "p_launch": p_launch, "wait_h": wait, **terms})
    return decide.ranked(pd.DataFrame(rows), req)  # the same ranking and row order


# --------------------------------------------------------------------- measurements
def cpu_ms(fn) -> float:
    t = time.process_time()
    fn()
    return (time.process_time() - t) * 1000


def in_process(adv, calls: int) -> None:
    u = decide.UtilityParams()
    fast = decide.advise(adv.cost, REQUEST, u, adv.ctx)
    slow = naive_advise(adv.cost, REQUEST, u, adv.ctx)
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)
    print(f"arms scored: {len(fast)}; product output == pre-change path: identical")
    a, b, d = [], [], []
    for _ in range(calls):  # A/B alternating
        a.append(cpu_ms(lambda: decide.advise(adv.cost, REQUEST, u, adv.ctx)))
        b.append(cpu_ms(lambda: naive_advise(adv.cost, REQUEST, u, adv.ctx)))
        d.append(cpu_ms(lambda: advisor.advise_document(adv, REQUEST, u)))
    ma, mb, md = statistics.median(a), statistics.median(b), statistics.median(d)
    print(f"advise, CPU per call (median of {calls}): {ma:7.1f} ms  "
          f"[goal < {GOAL_MS:.0f} ms: {'met' if ma < GOAL_MS else 'NOT met'}]")
    print(f"  with the JSON document (advise_document): {md:7.1f} ms")
    print(f"  pre-change per-arm pandas path, same model and context: {mb:7.1f} ms "
          f"-> ratio {mb / ma:5.1f}x")
    n = len(fast)
    arms = list(zip(fast["n_gpus"].tolist(), fast["hardware"].tolist(), strict=True))
    lk = statistics.median(cpu_ms(lambda: [(adv.ctx.p_launch(k, h, u), adv.ctx.wait_h(k))
                                           for k, h in arms]) for _ in range(9))
    pf = statistics.median(cpu_ms(lambda: [(naive_success_for(adv.ctx.priors, k, h),
                                            naive_wait_h(adv.ctx.waits, k)) for k, h in arms])
                           for _ in range(9))
    print(f"  priors + wait lookups for {n} arms: tables {lk:6.2f} ms vs pandas filters "
          f"{pf:6.2f} ms -> {pf / max(lk, 1e-3):5.0f}x")


def cli_call(db: Path) -> tuple[float, float, dict]:
    """(wall s, CPU s of the child, JSON) of one ``headroom advise`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "analytics.cli", "--db", str(db), *CLI_ARGS],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(out.stdout)


def cli(db: Path, warm: int) -> None:
    wall0, cpu0, cold = cli_call(db)
    runs = [cli_call(db) for _ in range(warm)]
    docs = [r[2] for r in runs]
    how = {"model_cache": None, "fold_sweep": None}  # how the fit was obtained, not its result
    same = all({**d, **how} == {**cold, **how} for d in docs)
    folds = cold.get("fold_sweep") or {}
    cpu0 += folds.get("task_cpu_s", 0.0)  # the folds ran in pool workers, not the CLI process
    print(f"headroom advise, cold ({cold['model_cache']}): wall {wall0:6.2f} s, "
          f"CPU {cpu0:6.2f} s (the CLI process + its {folds.get('computed', 0)} out-of-fold "
          f"fits' task CPU on the sweep runner)")
    ws, cs = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
    print(f"headroom advise, warm ({'/'.join(d['model_cache'] for d in docs)}, median of "
          f"{warm}): wall {ws:6.2f} s, CPU {cs:6.2f} s -> cold / warm CPU {cpu0 / cs:5.1f}x; "
          f"JSON identical: {same}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--warm", type=int, default=3)
    args = ap.parse_args()
    print(f"goal: advise < {GOAL_MS:.0f} ms CPU per call; the CLI reuses a stored fit; "
          f"load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        con = store.connect(db)
        ingest.ingest_files(con, [ingest.FileIn(DATA / rel, Path(rel).name) for rel in FILES])
        t = time.process_time()
        adv = advisor.fit(con)
        print(f"cost model fit (in process): {time.process_time() - t:6.2f} s CPU, "
              f"{adv.cost.rows} rows, {adv.jobs_rows} jobs")
        con.close()
        in_process(adv, args.calls)
        cli(db, args.warm)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
