"""The leakage-free decision backtest of the launch advisor against five model-free baselines
(OmniPilot paper, Sec. 4): size rule, H100/FP8 recipe, throughput-max, nearest neighbour and
cheapest fit, each scored by top-1 and regret on held-out workload cells.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analytics.advisor import model as cm
from analytics.advisor.decide import Context, UtilityParams, utility
from analytics.hardware import catalog as hardware


def _size_tp(params_b: float) -> int:
    """Size rule: TP by model size (<= 13B: 1, <= 34B: 2, <= 80B: 4, else 8)."""
    return 1 if params_b <= 13 else 2 if params_b <= 34 else 4 if params_b <= 80 else 8


_HW_PREF = ("A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "B200")


def _pick_size_rule(cell: pd.DataFrame) -> int:
    want = _size_tp(float(cell["params_b"].iloc[0]))
    tp_dist = (cell["tp"] - want).abs()
    c = cell[tp_dist == tp_dist.min()]
    hw_rank = c["hardware"].map(lambda h: _HW_PREF.index(h) if h in _HW_PREF else 99)
    prec_rank = c["precision"].map({"bf16": 0, "fp16": 1}).fillna(2)
    return c.assign(_h=hw_rank, _p=prec_rank).sort_values(["_h", "_p"]).index[0]


def _pick_h100_fp8(cell: pd.DataFrame) -> int:
    h = cell[cell["hardware"] == "H100-80GB"]
    if h.empty:
        return _pick_size_rule(cell)
    return h.assign(_p=(h["precision"] != "fp8").astype(int)).sort_values(["_p", "tp"]).index[0]


def _peak_tflops(row) -> float:
    spec = hardware.CATALOG.get(row["hardware"])
    if spec is None:
        return 0.0
    t = spec.fp8_tflops if row["precision"] == "fp8" and spec.fp8_tflops else spec.bf16_tflops
    return (t or 0.0) * row["tp"]


def _pick_throughput_max(cell: pd.DataFrame) -> int:
    return cell.assign(_t=cell.apply(_peak_tflops, axis=1)).sort_values(
        "_t", ascending=False).index[0]


def _pick_cheapest(cell: pd.DataFrame) -> int:
    return cell.sort_values(["rate_usd_h", "tp"]).index[0]


def backtest(cost: cm.CostModel, u: UtilityParams | None = None,
             ctx: Context | None = None) -> dict:
    """Leakage-free decision backtest on the cost model's held-out-cell predictions.

    Every cell's predictions come from the ``GroupKFold`` model that never saw the cell (see
    :func:`analytics.advisor.model.fit`). Cells with at least two measured, priced arms are
    scored; per cell the policy picks an arm; the true utility uses the measured throughput and
    power. ``top1`` = share of cells where the pick is the truly best arm; ``regret`` = mean of
    ``(U_best - U_pick) / |U_best|``. Baselines (model-free): size rule, H100/FP8 recipe,
    throughput-max (peak datasheet TFLOP/s x TP), nearest-neighbour (best arm of the most similar
    other cell), cheapest-fit.

    Returns
    -------
    dict: ``cells`` scored, ``policies`` {name: {top1, regret}}, ``folds`` (cell sets per fold
    are disjoint by construction).
    """
    u = u or UtilityParams()
    ctx = ctx or Context()
    o = cost.oof
    o = o[o["throughput_tok_s"].notna() & o["throughput_tok_s_q50"].notna()]
    o = o[o["hardware"].isin(list(u.prices_usd_per_gpu_h))]
    agg = {"throughput_tok_s": "median", "throughput_tok_s_q50": "median",
           "params_b": "first", "concurrency": "first", "out_len": "median", "in_len": "first"}
    for c in ("power_w", "power_w_q50"):
        if c in o:
            agg[c] = "median"
    arms_df = o.groupby(["cell", *cm.ARM], as_index=False).agg(agg)
    arms_df["n_gpus"] = arms_df["tp"]
    counts = arms_df.groupby("cell")["hardware"].transform("size")
    arms_df = arms_df[counts >= 2].reset_index(drop=True)
    if arms_df.empty:
        return {"cells": 0, "policies": {}}

    def u_of(row, thr_col, pow_col):
        pw = row.get(pow_col)
        return utility(row[thr_col], None if pw is None or pd.isna(pw) else pw, row["n_gpus"],
                       row["hardware"], None, 0.0, ctx.p_launch(row["n_gpus"], row["hardware"], u),
                       ctx.wait_h(row["n_gpus"]), u)["utility"]

    arms_df["u_true"] = arms_df.apply(u_of, axis=1, args=("throughput_tok_s", "power_w"))
    arms_df["u_pred"] = arms_df.apply(u_of, axis=1, args=("throughput_tok_s_q50", "power_w_q50"))
    spec_tdp = arms_df["hardware"].map(lambda h: hardware.CATALOG[h].tdp_w or 0.0)
    arms_df["rate_usd_h"] = arms_df["n_gpus"] * arms_df["hardware"].map(u.prices_usd_per_gpu_h) \
        + arms_df["n_gpus"] * spec_tdp / 1000 * u.usd_per_kwh
    cells = {c: g for c, g in arms_df.groupby("cell")}
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

    policies = {
        "advisor": lambda cid, g: g["u_pred"].idxmax(),
        "size_rule": lambda cid, g: _pick_size_rule(g),
        "h100_fp8_recipe": lambda cid, g: _pick_h100_fp8(g),
        "throughput_max": lambda cid, g: _pick_throughput_max(g),
        "nearest_neighbour": pick_nn,
        "cheapest_fit": lambda cid, g: _pick_cheapest(g),
    }
    result = {}
    for name, pick in policies.items():
        hits, regrets = [], []
        for cid, g in cells.items():
            best = g["u_true"].max()
            chosen = g.loc[pick(cid, g), "u_true"]
            hits.append(bool(chosen >= best - 1e-12))
            regrets.append(float((best - chosen) / abs(best)) if best != 0 else 0.0)
        result[name] = {"top1": float(np.mean(hits)), "regret": float(np.mean(regrets))}
    return {"cells": len(cells), "arms": int(len(arms_df)), "policies": result}
