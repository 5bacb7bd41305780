"""The leakage-free decision backtest of the launch advisor against five model-free baselines
(OmniPilot paper, Sec. 4): size rule, H100/FP8 recipe, throughput-max, nearest neighbour and
cheapest fit, each scored by top-1 and regret on held-out workload cells, with percentile
bootstrap 95 % intervals over cells. Arms are scored by the live ranking's own utility
(:func:`analytics.advisor.decide.score_arms`), KV-saturation and SLO terms included.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analytics.advisor import model as cm
from analytics.advisor.decide import Context, UtilityParams, p_slo, score_arms
from analytics.hardware import catalog as hardware


def _size_tp(params_b: float) -> int:
    """Size rule: TP by model size (<= 13B: 1, <= 34B: 2, <= 80B: 4, else 8)."""
    return 1 if params_b <= 13 else 2 if params_b <= 34 else 4 if params_b <= 80 else 8


_HW_PREF = ("A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "B200")


_PREC_RANK = {"bf16": 0, "fp16": 1}


def _pick_size_rule(cell: pd.DataFrame) -> int:
    """Size rule: the arms nearest the size's TP, then by hardware preference (:data:`_HW_PREF`,
    unknown last), then bf16, fp16, other; first in cell order on ties (a stable sort)."""
    want = _size_tp(float(cell["params_b"].iloc[0]))
    dist = np.abs(cell["tp"].to_numpy() - want)
    idx = np.flatnonzero(dist == dist.min())
    hw = [_HW_PREF.index(h) if h in _HW_PREF else 99 for h in cell["hardware"].to_numpy()[idx]]
    prec = [_PREC_RANK.get(p, 2) for p in cell["precision"].to_numpy()[idx]]
    return cell.index[idx[np.lexsort((prec, hw))[0]]]


def _pick_h100_fp8(cell: pd.DataFrame) -> int:
    """H100/FP8 recipe: an H100 arm, fp8 first, then the smallest TP; the size rule without
    an H100 arm."""
    idx = np.flatnonzero(cell["hardware"].to_numpy() == "H100-80GB")
    if not len(idx):
        return _pick_size_rule(cell)
    not_fp8 = cell["precision"].to_numpy()[idx] != "fp8"
    return cell.index[idx[np.lexsort((cell["tp"].to_numpy()[idx], not_fp8))[0]]]


def _peak_tflops(hw: str, precision: str, tp) -> float:
    spec = hardware.CATALOG.get(hw)
    if spec is None:
        return 0.0
    t = spec.fp8_tflops if precision == "fp8" and spec.fp8_tflops else spec.bf16_tflops
    return (t or 0.0) * tp


def _pick_throughput_max(cell: pd.DataFrame) -> int:
    peak = [_peak_tflops(h, p, t) for h, p, t in zip(cell["hardware"], cell["precision"],
                                                      cell["tp"], strict=True)]
    return pd.Series(peak, index=cell.index).sort_values(ascending=False).index[0]


def _pick_cheapest(cell: pd.DataFrame) -> int:
    return cell.sort_values(["rate_usd_h", "tp"]).index[0]


#: Bootstrap settings of the backtest's 95 % intervals: a percentile bootstrap over cells.
N_RESAMPLES, BOOT_SEED, BOOT_LEVEL = 1000, 0, 0.95


def bootstrap_ci(values, n_resamples: int = N_RESAMPLES, seed: int = BOOT_SEED,
                 level: float = BOOT_LEVEL) -> list[float]:
    """Percentile-bootstrap interval ``[lo, hi]`` of the mean of per-cell ``values``: cells are
    resampled with replacement ``n_resamples`` times from ``numpy.random.default_rng(seed)``
    (so every policy sees the same resampled cell sets, and reruns give the same interval);
    the interval is the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the resampled
    means (Efron and Tibshirani 1993, Sec. 13.3).

    >>> bootstrap_ci([1.0, 1.0, 1.0])
    [1.0, 1.0]
    """
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return [float("nan"), float("nan")]
    idx = np.random.default_rng(seed).integers(0, len(v), size=(n_resamples, len(v)))
    means = v[idx].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return [float(lo), float(hi)]


def _arms(cost: cm.CostModel, u: UtilityParams) -> pd.DataFrame:
    """One row per (cell, arm) with two or more measured, priced arms in the cell: medians of
    the measured targets and of their held-out q10 / q50 / q90 predictions; ``n_gpus`` is the
    GPUs the run used (TP x pipeline stages: a TP 1 x PP 4 run is priced as 4 GPUs)."""
    o = cost.oof
    o = o[o["throughput_tok_s"].notna() & o["throughput_tok_s_q50"].notna()]
    o = o[o["hardware"].isin(list(u.prices_usd_per_gpu_h))]
    agg = {"throughput_tok_s": "median", "throughput_tok_s_q50": "median",
           "params_b": "first", "concurrency": "first", "out_len": "median", "in_len": "first",
           "n_gpus": "max"}
    for t in ("power_w", "itl_ms", "ttft_ms"):
        for c in (t, f"{t}_q10", f"{t}_q50", f"{t}_q90"):
            if c in o:
                agg[c] = "median"
    arms_df = o.groupby(["cell", *cm.ARM], as_index=False).agg(agg)
    arms_df["n_gpus"] = arms_df["n_gpus"].fillna(arms_df["tp"]).astype(int)
    counts = arms_df.groupby("cell")["hardware"].transform("size")
    return arms_df[counts >= 2].reset_index(drop=True)


def _utilities(arms_df: pd.DataFrame, u: UtilityParams, ctx: Context, slos: dict) -> None:
    """Add ``u_true`` (measured throughput, power, SLO outcome) and ``u_pred`` (held-out q50,
    predicted SLO probability) with the live ranking's terms (:func:`decide.score_arms`: KV
    saturation above the knee, SLO violation, launch prior, queue wait), ``kv_factor`` and
    ``feasible`` (the memory model's verdict: the advisor, like the live ranking, never picks
    an arm it calls infeasible while a feasible one is measured)."""
    nan = np.full(len(arms_df), np.nan)

    def col(c):
        return arms_df[c].to_numpy(float) if c in arms_df else nan

    mems, true = score_arms(arms_df, col("throughput_tok_s"), col("power_w"),
                            p_slo(arms_df, slos, measured=True), u, ctx)
    _, pred = score_arms(arms_df, col("throughput_tok_s_q50"), col("power_w_q50"),
                         p_slo(arms_df, slos), u, ctx)
    arms_df["u_true"], arms_df["u_pred"] = true["utility"], pred["utility"]
    arms_df["kv_factor"], arms_df["occupancy"] = true["kv_factor"], true["occupancy"]
    arms_df["p_slo_true"], arms_df["p_slo_pred"] = true["p_slo"], pred["p_slo"]
    arms_df["feasible"] = [m["feasible"] for m in mems]


def _pick_advisor(cid, g: pd.DataFrame):
    ok = g[g["feasible"]]
    return (ok if len(ok) else g)["u_pred"].idxmax()


def backtest(cost: cm.CostModel, u: UtilityParams | None = None,
             ctx: Context | None = None, ttft_slo_ms: float | None = None,
             itl_slo_ms: float | None = None, n_resamples: int = N_RESAMPLES) -> dict:
    """Leakage-free decision backtest on the cost model's held-out-cell predictions.

    Every cell's predictions come from the ``GroupKFold`` model that never saw the cell (see
    :func:`analytics.advisor.model.fit`). Cells with at least two measured, priced arms are
    scored; per cell the policy picks an arm; the true utility uses the measured throughput,
    power and SLO outcome, the advisor's the held-out q50 and the predicted SLO probability,
    both through the live ranking's utility (:func:`analytics.advisor.decide.score_arms`:
    KV-saturation penalty above the 0.85 knee where the source measures the input length,
    SLO term when ``ttft_slo_ms`` / ``itl_slo_ms`` is given, launch prior per GPU kind and
    count, queue wait). ``top1`` = share of cells where the pick is the truly best arm;
    ``regret`` = mean of ``(U_best - U_pick) / |U_best|``; each with a 95 % percentile
    bootstrap interval over cells (:func:`bootstrap_ci`). Baselines (model-free): size rule,
    H100/FP8 recipe, throughput-max (peak datasheet TFLOP/s x TP), nearest-neighbour (best arm
    of the most similar other cell), cheapest-fit. ``advisor_ignoring_memory_model`` is the
    advisor allowed to pick a measured arm its memory model calls infeasible (weights plus
    overhead do not fit, or the KV cache holds no one sequence:
    :func:`analytics.advisor.memory.memory_fit`), to show what the feasibility rule costs; on
    the staged data the model calls no measured arm infeasible, so the two coincide.

    Returns
    -------
    dict: ``cells`` scored, ``arms``, ``policies`` {name: {top1, top1_ci95 [lo, hi], regret,
    regret_ci95}}, ``bootstrap`` (resamples, seed, level, method), ``terms``: ``slo`` (the SLOs
    used, ms; null = no SLO term), ``kv_arms`` (arms whose occupancy is known),
    ``kv_penalised_arms`` (arms with KV factor < 1), ``kv_cells`` (cells holding one),
    ``infeasible_measured_arms`` (measured arms the memory model calls infeasible),
    ``kv_capped_arms`` (arms whose KV cache holds fewer sequences than their concurrency:
    scored at a full cache).
    """
    u = u or UtilityParams()
    ctx = ctx or Context()
    arms_df = _arms(cost, u)
    if arms_df.empty:
        return {"cells": 0, "policies": {}}
    slos = {"ttft_ms": ttft_slo_ms, "itl_ms": itl_slo_ms}
    _utilities(arms_df, u, ctx, slos)
    spec_tdp = arms_df["hardware"].map(lambda h: hardware.CATALOG[h].tdp_w or 0.0)
    arms_df["rate_usd_h"] = arms_df["n_gpus"] * arms_df["hardware"].map(u.prices_usd_per_gpu_h) \
        + arms_df["n_gpus"] * spec_tdp / 1000 * u.usd_per_kwh
    cells = {c: g for c, g in arms_df.groupby("cell")}
    result = {name: _score(cells, pick, n_resamples)
              for name, pick in _policies(arms_df, cells).items()}
    pen = arms_df["kv_factor"] < 1
    return {"cells": len(cells), "arms": int(len(arms_df)), "policies": result,
            "bootstrap": {"resamples": n_resamples, "seed": BOOT_SEED, "level": BOOT_LEVEL,
                          "method": "percentile bootstrap over cells"},
            "terms": {"slo": slos, "kv_knee": u.kv_knee,
                      "kv_arms": int(arms_df["occupancy"].notna().sum()),
                      "kv_penalised_arms": int(pen.sum()),
                      "kv_cells": int(arms_df.loc[pen, "cell"].nunique()),
                      "infeasible_measured_arms": int((~arms_df["feasible"]).sum()),
                      "kv_capped_arms": int((arms_df["occupancy"] > 1).sum())}}


def _score(cells: dict, pick, n_resamples: int) -> dict:
    """top1 / regret of one policy over the cells, with bootstrap intervals."""
    hits, regrets = [], []
    for cid, g in cells.items():
        best = g["u_true"].max()
        chosen = g.loc[pick(cid, g), "u_true"]
        hits.append(float(chosen >= best - 1e-12))
        regrets.append(float((best - chosen) / abs(best)) if best != 0 else 0.0)
    return {"top1": float(np.mean(hits)), "top1_ci95": bootstrap_ci(hits, n_resamples),
            "regret": float(np.mean(regrets)), "regret_ci95": bootstrap_ci(regrets, n_resamples)}


def _policies(arms_df: pd.DataFrame, cells: dict) -> dict:
    """The advisor and the five baselines: name -> pick(cell_id, cell_frame) -> row index."""
    feats = arms_df.groupby("cell").agg(p=("params_b", "first"), c=("concurrency", "first"),
                                        o=("out_len", "median"))
    z = np.log(feats.astype(float).clip(lower=1e-9))
    z = (z - z.mean()) / z.std(ddof=0).replace(0, 1)

    def pick_nn(cell_id, g):
        others = z.drop(index=cell_id)
        d = np.sqrt(((others - z.loc[cell_id]) ** 2).sum(axis=1)).sort_values()
        mine = set(zip(g["hardware"], g["tp"], g["precision"], strict=True))
        for other in d.index:
            og = cells[other]
            og = og[[k in mine for k in zip(og["hardware"], og["tp"], og["precision"],
                                             strict=True)]]
            if len(og) >= 1:
                best = og.sort_values("u_true", ascending=False).iloc[0]
                return g[(g["hardware"] == best["hardware"]) & (g["tp"] == best["tp"])
                         & (g["precision"] == best["precision"])].index[0]
        return _pick_size_rule(g)

    return {
        "advisor": _pick_advisor,
        "advisor_ignoring_memory_model": lambda cid, g: g["u_pred"].idxmax(),
        "size_rule": lambda cid, g: _pick_size_rule(g),
        "h100_fp8_recipe": lambda cid, g: _pick_h100_fp8(g),
        "throughput_max": lambda cid, g: _pick_throughput_max(g),
        "nearest_neighbour": pick_nn,
        "cheapest_fit": lambda cid, g: _pick_cheapest(g),
    }
