"""Quantile cost model with held-out-cell conformal calibration and a support envelope.

Method: OmniPilot paper, Sec. 3.2 (cost model) and Appendix C.3 (recalibration):

* per target, LightGBM quantile regressors for q0.1 / q0.5 / q0.9 **in log space** (targets span
  orders of magnitude; errors are multiplicative); a target is fit only with >= 15 rows and
  >= 3 workload cells, with ``min(n_splits, cells)`` grouped folds (issue 18 item 6: TTFT is
  measured in 3 cells on the staged Argonne tables, so it is fit with 3 folds, i.e.
  leave-one-cell-out; ``metrics[target]["folds"]`` says how many were used, and
  ``metrics[target]["support"]`` the measured ranges of that target alone);
* features: log parameters, log active parameters (MoE), TP, GPU count, precision one-hot +
  effective bits, hardware one-hot + datasheet numbers (:mod:`analytics.hardware.catalog`), framework and
  task one-hot, log input / output length, log concurrency (lengths the source does not measure
  stay missing; LightGBM routes missing values);
* calibration: ``GroupKFold`` by **workload cell** (model x task x input x output length x
  concurrency); the CQR score ``max(q_lo - y, y - q_hi)`` on held-out cells gives an additive
  offset in log space (conformal quantile at level ``ceil((n+1)(1-alpha))/n``); a random-fold
  offset is computed the same way from ``KFold`` residuals for comparison;
* support envelope: per-axis ranges / categories stored at fit time; requests outside any axis
  abstain (Sec. 4.3: intervals fail out of distribution, so width alone is not a guard).

Quantile crossing: the raw crossing rate (q_lo > q_med or q_med > q_hi) is reported; outputs
are sorted per row so q10 <= q50 <= q90 always holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import lightgbm as lgb
import numpy as np
import pandas as pd

from analytics.hardware import catalog as hardware

TARGETS = ("throughput_tok_s", "ttft_ms", "itl_ms", "power_w", "energy_per_token_j")
QUANTILES = (0.1, 0.5, 0.9)
MIN_ROWS = 15
#: fewest workload cells a target is fitted on: grouped folds need two cells, and the held-out
#: cell coverage calibrates on half of them and measures on the other half
MIN_CELLS = 3
#: precision labels of the sources that name a canonical precision otherwise (Argonne Fig. 3
#: quantisation tables: ``full_prec`` is the fp16 baseline, ``int8_sq`` SmoothQuant W8A8 int8)
PRECISION_ALIASES = {"full_prec": "fp16", "int8_sq": "int8"}
CELL = ("model", "task", "in_len", "out_len", "concurrency")
ARM = ("hardware", "tp", "precision")
NUMERIC_AXES = ("params_b", "concurrency", "in_len", "out_len", "tp")
CATEGORICAL_AXES = ("hardware", "precision", "task", "framework")


@dataclass(frozen=True)
class FitParams:
    """Cost-model settings (defaults follow the paper: 80 % intervals, 5 grouped folds)."""

    alpha: float = 0.2
    n_splits: int = 5
    n_estimators: int = 150
    learning_rate: float = 0.08
    num_leaves: int = 15
    min_child_samples: int = 5
    targets: tuple[str, ...] = TARGETS
    seed: int = 0


@dataclass
class CostModel:
    """A fitted cost model.

    Attributes
    ----------
    schema : category lists of the one-hot features
    models : target -> quantile -> fitted ``LGBMRegressor`` (log-space)
    offsets : target -> held-out-cell CQR offset (log space)
    envelope : support envelope (see :func:`support_envelope`)
    metrics : target -> dict of rows, cells, mape, coverage (held_out_cell / random_fold / raw),
        mean width ratio, quantile crossing rate
    oof : out-of-fold (held-out-cell) predictions per row, used by the leakage-free backtest
    rows : training rows (all targets)
    """

    schema: dict
    models: dict
    offsets: dict
    envelope: dict
    metrics: dict
    oof: pd.DataFrame
    rows: int
    params: FitParams = field(default_factory=FitParams)


def cell_key(df: pd.DataFrame) -> pd.Series:
    """Workload-cell label per row (model x task x input len x output len x concurrency).

    Where the source does not control the lengths (ML.ENERGY: no input length, and the output
    length is the *measured* mean of the task's prompts), the task stands for the length
    distribution and the lengths are left out of the key, so the arms that served the same
    workload share a cell.
    """
    df = df.copy()
    df["out_len"] = df["out_len"].where(df["in_len"].notna())
    parts = [df[c].astype(object).where(df[c].notna(), "na").astype(str) if c in ("model", "task")
             else df[c].astype(float).round(1).astype(object).where(df[c].notna(), "na")
             .astype(str) for c in CELL]
    key = parts[0]
    for p in parts[1:]:
        key = key + "|" + p
    return key


def prepare(bench: pd.DataFrame) -> pd.DataFrame:
    """Rows usable for fitting: not failed, with parameters, output length and concurrency."""
    df = bench[~bench["failed"].fillna(False).astype(bool)].copy()
    df = df[df["params_b"].notna() & df["out_len"].notna() & df["concurrency"].notna()]
    df["framework"] = df["framework"].fillna("unknown")
    df["task"] = df["task"].fillna("unknown")
    df["active_params_b"] = df["active_params_b"].fillna(df["params_b"])
    df["precision"] = df["precision"].replace(PRECISION_ALIASES)
    df["cell"] = cell_key(df)
    return df.reset_index(drop=True)


def bits(precision: pd.Series) -> pd.Series:
    """Effective bits per weight of each precision label (``awq`` / ``gptq`` -> int4 -> 4;
    :func:`analytics.hardware.catalog.precision`); NaN for an unknown label."""
    return precision.map(lambda p: hardware.PRECISION_BITS.get(hardware.precision(p))
                         ).astype(float)


def make_schema(df: pd.DataFrame) -> dict:
    return {c: sorted(df[c].dropna().astype(str).unique().tolist())
            for c in ("hardware", "precision", "framework", "task")}


def featurize(df: pd.DataFrame, schema: dict) -> pd.DataFrame:
    """Feature matrix, shape (n_rows, n_features); column order fixed by ``schema``."""
    def spec(col):  # datasheet value per row; NaN for unknown hardware or a missing value
        values = {h: (np.nan if getattr(g, col, None) is None else getattr(g, col))
                  for h, g in hardware.CATALOG.items()}
        return df["hardware"].map(values).astype(float)

    def log(col):
        return np.log(df[col].astype(float).where(df[col].astype(float) > 0))

    cols = {
        "log_params_b": log("params_b"),
        "log_active_params_b": log("active_params_b"),
        "tp": df["tp"].astype(float),
        "n_gpus": df["n_gpus"].astype(float),
        "bits": bits(df["precision"]),
        "log_in_len": log("in_len"),
        "log_out_len": log("out_len"),
        "log_concurrency": log("concurrency"),
        "gpu_mem_gb": spec("memory_gb"),
        "mem_bw_gbs": spec("mem_bw_gbs"),
        "bf16_tflops": spec("bf16_tflops"),
        "fp8_tflops": spec("fp8_tflops"),
        "tdp_w": spec("tdp_w"),
    }
    for col in ("hardware", "precision", "framework", "task"):
        values = df[col].astype(str).to_numpy()
        for cat in schema[col]:
            cols[f"{col}={cat}"] = (values == cat).astype(float)
    return pd.DataFrame(cols, index=df.index)


def _regressor(q: float, p: FitParams) -> lgb.LGBMRegressor:
    return lgb.LGBMRegressor(objective="quantile", alpha=q, n_estimators=p.n_estimators,
                             learning_rate=p.learning_rate, num_leaves=p.num_leaves,
                             min_child_samples=p.min_child_samples, n_jobs=1,
                             random_state=p.seed, verbose=-1)


#: One out-of-fold job: (target, scheme, fold index); scheme ``"grouped"`` (``GroupKFold`` by
#: workload cell) or ``"random"`` (``KFold``, the leaky comparison).
FoldJob = tuple[str, str, int]
#: Runs every :data:`FoldJob` of a fold plan (:func:`fold_plan`): ``run(plan, params) ->
#: {job: (n_test, 3) log-space predictions}``; :func:`run_folds` in this process, or
#: :func:`analytics.advisor.fold_points.runner` on the sweep runner (issue 17).
FoldRunner = Callable[[dict, "FitParams"], dict]
SCHEMES = ("grouped", "random")


def predict_fold(X: pd.DataFrame, y: np.ndarray, train, test, p: FitParams) -> np.ndarray:
    """Log-space q10 / q50 / q90 of the rows ``test`` from the three quantile regressors fitted
    on the rows ``train`` (positions in ``X`` / ``y``); shape ``(len(test), 3)``, unsorted."""
    return np.column_stack([_regressor(q, p).fit(X.iloc[train], y[train]).predict(X.iloc[test])
                            for q in QUANTILES])


def fold_jobs(plan: dict) -> list[FoldJob]:
    """Every out-of-fold job of ``plan`` (:func:`fold_plan`), in a fixed order."""
    return [(t, s, k) for t, d in plan.items() for s in SCHEMES for k in range(len(d["splits"][s]))]


def run_folds(plan: dict, p: FitParams) -> dict:
    """Every job of ``plan`` in this process (:data:`FoldRunner`)."""
    return {(t, s, k): predict_fold(plan[t]["X"], plan[t]["y"], *plan[t]["splits"][s][k], p)
            for t, s, k in fold_jobs(plan)}


def _oof(plan_t: dict, scheme: str, preds: dict, target: str) -> np.ndarray:
    """Out-of-fold log-space quantile predictions of one target and scheme, shape (n, 3)."""
    out = np.full((len(plan_t["y"]), len(QUANTILES)), np.nan)
    for k, (_, test) in enumerate(plan_t["splits"][scheme]):
        out[test] = preds[(target, scheme, k)]
    return out


def cell_folds(groups: np.ndarray, n_splits: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``GroupKFold`` (train, test) index pairs by workload cell: no cell is on both sides."""
    from sklearn.model_selection import GroupKFold  # here, not at import: predicting needs none

    groups = np.asarray(groups).astype(str)
    return list(GroupKFold(n_splits=n_splits).split(np.zeros(len(groups)), groups=groups))


def conformal_offset(scores: np.ndarray, alpha: float) -> float:
    """Split-conformal quantile of CQR scores: the ``ceil((n+1)(1-alpha))``-th smallest.

    >>> conformal_offset(np.array([0.1, 0.2, 0.3, 0.4]), 0.2)
    0.4
    """
    s = np.sort(np.asarray(scores, dtype=float))
    n = len(s)
    k = math.ceil((n + 1) * (1 - alpha))
    return float(s[min(k, n) - 1]) if n else 0.0


def _scores(pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.maximum(pred[:, 0] - y, y - pred[:, 2])


def _covered(pred: np.ndarray, y: np.ndarray, off: float) -> np.ndarray:
    return (y >= pred[:, 0] - off) & (y <= pred[:, 2] + off)


def support_envelope(df: pd.DataFrame) -> dict:
    """Per-axis support of the training rows (OmniPilot Sec. 3.2: stored at fit time).

    Returns
    -------
    dict with ``numeric`` {axis: [min, max]}, ``categorical`` {axis: sorted values},
    ``combos`` (hardware, precision) pairs measured and ``combo_params_b`` {"hw/precision":
    [min, max] parameters, billions}: a precision measured on a GPU kind for one model size
    only (the Argonne int8 runs: Llama-3-8B on A100) does not vouch for other sizes there.
    """
    num = {a: [float(df[a].min()), float(df[a].max())] for a in NUMERIC_AXES if df[a].notna().any()}
    cat = {a: sorted(df[a].dropna().astype(str).unique().tolist()) for a in CATEGORICAL_AXES}
    combos = sorted({f"{h}/{p}" for h, p in zip(df["hardware"], df["precision"], strict=True)})
    sizes = df[df["params_b"].notna()].assign(
        combo=df["hardware"].astype(str) + "/" + df["precision"].astype(str)).groupby("combo")[
        "params_b"].agg(["min", "max"])
    combo_params = {c: [float(r["min"]), float(r["max"])] for c, r in sizes.iterrows()}
    return {"numeric": num, "categorical": cat, "combos": combos,
            "combo_params_b": combo_params}


def outside(envelope: dict, row: dict) -> str | None:
    """The first axis on which ``row`` leaves the envelope, as a sentence; ``None`` inside."""
    for axis in ("hardware", "precision", "task", "framework"):
        allowed = envelope["categorical"].get(axis, [])
        if row.get(axis) is not None and str(row[axis]) not in allowed:
            return f"{axis} {row[axis]!r} was never measured ({len(allowed)} known)"
    combo = f"{row.get('hardware')}/{row.get('precision')}"
    if row.get("hardware") is not None and combo not in envelope["combos"]:
        return f"precision {row.get('precision')} was never measured on {row.get('hardware')}"
    for axis, (lo, hi) in envelope["numeric"].items():
        v = row.get(axis)
        if v is not None and not (isinstance(v, float) and math.isnan(v)) and not lo <= v <= hi:
            return f"{axis} {v:g} outside the measured range [{lo:g}, {hi:g}]"
    size, rng = row.get("params_b"), envelope.get("combo_params_b", {}).get(combo)
    if rng and size is not None and not (isinstance(size, float) and math.isnan(size)) \
            and not rng[0] <= size <= rng[1]:
        return (f"precision {row.get('precision')} on {row.get('hardware')} was measured for "
                f"{rng[0]:g}-{rng[1]:g} B parameters only, not {size:g} B")
    return None


def fold_plan(bench: pd.DataFrame, params: FitParams | None = None) -> dict:
    """What :func:`fit` cross-validates: the prepared rows and, per fittable target, its
    features, log target, cells and fold splits.

    Returns
    -------
    dict: ``df`` (prepared rows), ``schema``, ``X`` (features of every row), ``skipped``
    (target -> the ``metrics`` entry of a target with too few rows or cells) and ``targets``:
    target -> ``{"mask", "X", "y", "groups", "n_cells", "splits": {"grouped": [(train,
    test), ...], "random": [...]}}`` (positions within the target's rows; ``min(n_splits,
    cells)`` folds of each scheme).

    Raises
    ------
    ValueError
        Fewer than ``MIN_ROWS`` usable throughput rows.
    """
    from sklearn.model_selection import KFold

    p = params or FitParams()
    df = prepare(bench)
    thr = df[df["throughput_tok_s"].notna()]
    if len(thr) < MIN_ROWS:
        raise ValueError(f"only {len(thr)} benchmark rows with throughput; the cost model needs "
                         f"at least {MIN_ROWS} (ingest ML.ENERGY / Argonne / vllm bench results)")
    schema = make_schema(df)
    X_all = featurize(df, schema)
    targets, skipped = {}, {}
    for target in p.targets:
        mask = df[target].notna() & (df[target] > 0)
        sub = df[mask]
        n_cells = sub["cell"].nunique()
        if len(sub) < MIN_ROWS or n_cells < MIN_CELLS:
            skipped[target] = {"rows": int(len(sub)), "cells": int(n_cells), "fitted": False,
                               "reason": f"{len(sub)} rows in {n_cells} workload cells; a "
                                         f"target needs {MIN_ROWS} rows in {MIN_CELLS} cells"}
            continue
        X = X_all[mask]
        groups = sub["cell"].astype(str).to_numpy()
        k_folds = min(p.n_splits, n_cells)
        splits = {"grouped": cell_folds(groups, k_folds),
                  "random": list(KFold(k_folds, shuffle=True, random_state=p.seed).split(X))}
        targets[target] = {"mask": mask, "X": X, "y": np.log(sub[target].to_numpy(float)),
                           "groups": groups, "n_cells": int(n_cells), "splits": splits}
    return {"df": df, "schema": schema, "X": X_all, "skipped": skipped, "targets": targets}


def fit(bench: pd.DataFrame, params: FitParams | None = None,
        folds: FoldRunner | None = None) -> CostModel:
    """Fit the quantile cost model, calibrate it on held-out cells, store the envelope.

    Parameters
    ----------
    bench : ``bench_runs`` rows (:func:`analytics.store.bench_runs`).
    params : fit settings.
    folds : runs the out-of-fold fits (:data:`FoldRunner`; default :func:`run_folds`, in this
        process); every runner gives the same numbers, as each fold fit is single-threaded and
        seeded.

    Returns
    -------
    CostModel

    A target with fewer than ``MIN_ROWS`` rows or ``MIN_CELLS`` cells is not fitted
    (``metrics[target]`` = rows, cells, ``fitted`` False, ``reason``); the others use
    ``min(params.n_splits, cells)`` grouped folds (``metrics[target]["folds"]``).

    Raises
    ------
    ValueError
        Fewer than ``MIN_ROWS`` usable throughput rows.
    """
    p = params or FitParams()
    plan = fold_plan(bench, p)
    df = plan["df"]
    preds = (folds or run_folds)(plan["targets"], p)
    rng = np.random.default_rng(p.seed)
    models, offsets, metrics = {}, {}, {}
    oof = df[["cell", *ARM, "model", "task", "params_b", "in_len", "out_len", "concurrency",
              "n_gpus"]].copy()
    for target in p.targets:
        if target not in plan["targets"]:
            metrics[target] = plan["skipped"][target]
            continue
        t = plan["targets"][target]
        X, y, groups, mask, sub = t["X"], t["y"], t["groups"], t["mask"], df[t["mask"]]
        grouped, random_ = _oof(t, "grouped", preds, target), _oof(t, "random", preds, target)
        crossing = float(np.mean((grouped[:, 0] > grouped[:, 1]) | (grouped[:, 1] > grouped[:, 2])))
        grouped.sort(axis=1)
        random_.sort(axis=1)
        s_grp, s_rnd = _scores(grouped, y), _scores(random_, y)
        # held-out-cell coverage: offset from one half of the cells, measured on the other half
        cells = np.array(sorted(set(groups)))
        half = set(rng.permutation(cells)[: len(cells) // 2])
        in_a = np.array([g in half for g in groups])
        cov_cells = []
        for calib, test in ((in_a, ~in_a), (~in_a, in_a)):
            off = conformal_offset(s_grp[calib], p.alpha)
            cov_cells.append(float(_covered(grouped[test], y[test], off).mean()))
        off_grp = conformal_offset(s_grp, p.alpha)
        off_rnd = conformal_offset(s_rnd, p.alpha)
        raw_width = float(np.mean(grouped[:, 2] - grouped[:, 0]))
        mape = float(np.mean(np.abs(np.exp(grouped[:, 1]) - np.exp(y)) / np.exp(y)) * 100)
        metrics[target] = {
            "rows": int(len(sub)), "cells": t["n_cells"], "fitted": True,
            "folds": len(t["splits"]["grouped"]),
            "support": support_envelope(sub), "mape_pct": mape,
            "r2_log": float(1 - np.sum((grouped[:, 1] - y) ** 2) / np.sum((y - y.mean()) ** 2)),
            "coverage": {"held_out_cell": float(np.mean(cov_cells)),
                         "random_fold": float(_covered(grouped, y, off_rnd).mean()),
                         "raw": float(_covered(grouped, y, 0.0).mean()),
                         "nominal": 1 - p.alpha},
            "offset_log": {"held_out_cell": off_grp, "random_fold": off_rnd},
            "width_ratio": float((raw_width + 2 * off_grp) / raw_width) if raw_width > 0 else None,
            "crossing_rate": crossing,
        }
        offsets[target] = off_grp
        for k, q in enumerate(QUANTILES):
            col = f"{target}_q{int(q * 100)}"
            oof[col] = np.nan
            vals = grouped[:, k] + (-off_grp if k == 0 else off_grp if k == 2 else 0.0)
            oof.loc[mask.to_numpy(), col] = np.exp(vals)
        oof[target] = df[target]
        if target == "throughput_tok_s":  # fold of each row's held-out prediction (audit)
            fold = np.full(len(df), -1)
            positions = np.flatnonzero(mask.to_numpy())
            for k, (_, test) in enumerate(t["splits"]["grouped"]):
                fold[positions[test]] = k
            oof["fold"] = fold
        models[target] = {q: _regressor(q, p).fit(X, y) for q in QUANTILES}
    return CostModel(schema=plan["schema"], models=models, offsets=offsets,
                     envelope=support_envelope(df[df["throughput_tok_s"].notna()]),
                     metrics=metrics, oof=oof, rows=int(len(df)), params=p)


def booster(m) -> lgb.Booster:
    """The ``lightgbm.Booster`` of a fitted ``LGBMRegressor`` (or the booster itself, as loaded
    from model text by :mod:`analytics.advisor.persist`)."""
    return m.booster_ if isinstance(m, lgb.LGBMRegressor) else m


def predict(model: CostModel, rows: pd.DataFrame) -> pd.DataFrame:
    """Calibrated q10 / q50 / q90 per target for arbitrary rows (original units).

    Parameters
    ----------
    rows : DataFrame with the feature columns of ``bench_runs`` (hardware, tp, n_gpus, pp,
        precision, framework, task, params_b, active_params_b, in_len, out_len, concurrency).

    Returns
    -------
    DataFrame, one row per input row, columns ``<target>_q10/_q50/_q90`` for fitted targets.
    """
    df = rows.copy()
    df["active_params_b"] = df["active_params_b"].fillna(df["params_b"])
    X = featurize(df, model.schema)
    out = {}
    Xa = X.to_numpy(dtype=float)
    for target, qs in model.models.items():
        pred = np.column_stack([booster(qs[q]).predict(Xa, num_threads=1) for q in QUANTILES])
        pred.sort(axis=1)
        off = model.offsets[target]
        pred[:, 0] -= off
        pred[:, 2] += off
        for k, q in enumerate(QUANTILES):
            out[f"{target}_q{int(q * 100)}"] = np.exp(pred[:, k])
    return pd.DataFrame(out, index=df.index)
