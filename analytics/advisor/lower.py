"""A one-sided calibrated lower bound of a replica's throughput (issue 30: the fleet plan's
capacity risk), from the cost model's held-out-cell predictions.

Method: split conformal on the out-of-fold q10 (OmniPilot paper, Sec. 3.2 / Appendix C.3: the
cost model's quantile regressors, each row predicted by the fit that did not see its workload
cell). The score of row ``i`` is ``s_i = log q10_i - log y_i`` (how far the prediction sits above
the measured throughput); with ``o`` the ``ceil((n+1)(1-alpha))``-th smallest score, the bound
``L = q10 * exp(-o)`` misses (``y < L``) on a new cell with probability at most ``alpha`` when
cells are exchangeable. One-sided, so all of ``alpha`` is spent below: the two-sided CQR band
of the advisor spends it on both sides and would state a lower tail of up to ``alpha``
anyway.

:func:`held_out_lower_coverage` measures it the way the advisor measures its bands: the
offset from one half of the cells, the miss rate on the other half, and back.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analytics.advisor.model import conformal_offset

TARGET = "throughput_tok_s"
Q_LOW = f"{TARGET}_q10"


def scores(oof: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``oof`` (:attr:`analytics.advisor.model.CostModel.oof`) with a measured and
    a predicted throughput, with ``score`` = log q10 - log y. Raises KeyError when the cost
    model fitted no throughput."""
    if Q_LOW not in oof:
        raise KeyError("the cost model has no throughput prediction")
    rows = oof[(oof[TARGET] > 0) & (oof[Q_LOW] > 0)].copy()
    rows["score"] = np.log(rows[Q_LOW].to_numpy(float)) - np.log(rows[TARGET].to_numpy(float))
    return rows


def offset(oof: pd.DataFrame, alpha: float) -> float:
    """The one-sided conformal offset ``o`` at miscoverage ``alpha`` in (0, 1) (log space)."""
    if not 0 < alpha < 1:
        raise ValueError(f"capacity risk must be in (0, 1), not {alpha!r}")
    return conformal_offset(scores(oof)["score"].to_numpy(), alpha)


def held_out_lower_coverage(oof: pd.DataFrame, alpha: float, seed: int = 0) -> dict:
    """The bound's miss rate on cells its offset never saw: cells split in two halves at
    random (``seed``), the offset from one half, ``P(y < L)`` counted on the other, both ways.

    Returns ``{"alpha", "miss_rate" (pooled over both halves), "rows", "cells"}``."""
    rows = scores(oof)
    cells = np.array(sorted(rows["cell"].astype(str).unique()))
    half = set(np.random.default_rng(seed).permutation(cells)[: len(cells) // 2])
    in_a = rows["cell"].astype(str).isin(half).to_numpy()
    s = rows["score"].to_numpy()
    missed = 0
    for calib, test in ((in_a, ~in_a), (~in_a, in_a)):
        missed += int((s[test] > conformal_offset(s[calib], alpha)).sum())
    return {"alpha": alpha, "miss_rate": missed / len(rows), "rows": int(len(rows)),
            "cells": int(len(cells))}


def knee_bound(oof: pd.DataFrame, knee: dict, alpha: float) -> float | None:
    """The lower bound of the throughput of measured run ``knee`` (a ``bench_runs`` record),
    from the prediction of the fit that did not see its cell: ``q10 * exp(-o)``, tokens/s;
    None when the cost model has no held-out prediction of that run."""
    rows = scores(oof)
    match = np.ones(len(rows), dtype=bool)
    for col in ("model", "task", "hardware", "tp", "precision", "concurrency", "n_gpus"):
        if col in rows and knee.get(col) is not None and pd.notna(knee.get(col)):
            match &= (rows[col] == knee[col]).to_numpy()
    if "out_len" in rows and knee.get("out_len") is not None and pd.notna(knee["out_len"]):
        match &= np.isclose(rows["out_len"].to_numpy(float), float(knee["out_len"]))
    hit = rows[match]
    if hit.empty:
        return None
    return float(hit[Q_LOW].iloc[0] * np.exp(-offset(oof, alpha)))
