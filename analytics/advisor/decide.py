"""Arms, feasibility, expected utility and ranking (the leakage-free backtest against the
baselines is :mod:`analytics.advisor.backtest`).

OmniPilot paper, Sec. 3.3: arms are GPU kind x TP degree x precision; utility is predicted
throughput x runtime x value per token, minus compute cost (node-hours), queue wait, expected
launch-failure cost (beta-binomial prior, :mod:`analytics.advisor.priors`), SLO-violation cost
and a multiplicative KV-saturation throughput penalty above an occupancy knee of 0.85; outside
the support envelope the advisor abstains and a rule-based fallback answers (Sec. 3.1).

Utility of one arm for a run of ``runtime_h`` hours, USD::

    rate_usd_h   = n_gpus * price_usd_per_gpu_h + power_w / 1000 * usd_per_kwh
    served_tok   = throughput_tok_s * kv_factor * (1 - p_slo) * 3600 * runtime_h
    U = value_per_token_usd * served_tok
        - rate_usd_h * runtime_h                       (compute)
        - queue_weight * wait_h(n_gpus) * rate_usd_h   (queue wait, from job history)
        - (1 - p_launch) * restart_h * rate_usd_h      (expected launch failure)

``kv_factor = max(0, 1 - kv_slope * max(0, occupancy - 0.85))``; ``p_slo`` is the probability
that TTFT or ITL exceeds its SLO under a log-normal through the calibrated q10 / q90 (the cost of
a violated SLO is the value of the tokens it would have served). Memory model
(:func:`memory_fit`, as vLLM sizes its KV cache): an arm is infeasible, never ranked, when its
weights ``params_b * bits / 8`` GB plus a stated overhead do not fit ``n_gpus * memory_gb *
gpu_mem_util`` or when what is left holds no one ``in_len + out_len`` sequence; a cache too
small for the offered concurrency caps it ("KV cache holds N of M concurrent sequences") and
the arm is scored at a full cache (occupancy > 1 counts as 1 in ``kv_factor``).

One scoring path: :func:`score_arms` (memory model, launch prior per GPU kind and count, queue
wait, utility terms) and :func:`p_slo` serve both the live ranking (:func:`advise`) and the
backtest (:mod:`analytics.advisor.backtest`), so the KV knee and the SLO term act in both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import special

from analytics.advisor import model as cm
from analytics.advisor import priors as pr
from analytics.advisor.memory import (  # noqa: F401  (re-exported: decide.memory_fit ...)
    DEVICE_BYTES_PER_GB,
    KV_EXPONENT,
    KV_REF_BYTES,
    KV_REF_PARAMS_B,
    kv_bytes_per_token,
    memory_fit,
)
from analytics.hardware import catalog as hardware


def default_prices() -> dict[str, float]:
    """USD per GPU-hour where a public list price is sourced (``hardware.CATALOG``: AWS
    on-demand per 8-GPU instance / 8). Hardware without a sourced price is left out: its arms
    are shown as "no price" until the user enters one."""
    out = {}
    for g in hardware.CATALOG.values():
        if g.price_usd_per_h is not None:
            out[g.name] = float(g.price_usd_per_h)
    return out


@dataclass(frozen=True)
class UtilityParams:
    """Every term and weight of the utility, editable.

    Attributes
    ----------
    value_per_token_usd : value of one served output token (paper Sec. 3.3.1: 2e-7, calibrated
        by revealed preference on the authors' cluster)
    prices_usd_per_gpu_h : hardware key -> USD per GPU-hour (default: :func:`default_prices`)
    usd_per_kwh : electricity price for the power term (EIA Electric Power Monthly, 2023 US
        average industrial price, about 0.08 USD/kWh)
    runtime_h : hours the server will run
    queue_weight : weight of expected queue wait (hours x arm cost rate). headroom's constant:
        the paper (Sec. 3.3.1) names the queue-wait term but gives it no weight; 1.0 charges an
        hour of expected wait as an hour of the arm's cost (`headroom advise --queue-weight`)
    restart_h : hours of arm cost lost per failed launch. headroom's constant: the paper names
        an "expected-failure restart cost" without a value; 0.5 h stands for a relaunch (weights
        load, warm-up) and half an hour of lost service (`headroom advise --restart-h`, the
        Placement page's field)
    default_launch_success : used without job history (paper Sec. 3.3.2: flat 0.95 default)
    kv_knee, kv_slope : KV-saturation penalty (knee 0.85 from the paper; slope is ours)
    gpu_mem_util : fraction of device memory the server may use (vLLM default 0.9)
    overhead_gb_per_gpu : GB per GPU inside that fraction that hold neither weights nor KV
        cache (:func:`memory_fit`): 2.6 GB = 2.42 GiB, the activation peak (17.06 - 14.99
        GiB) plus non-torch memory (0.35 GiB) vLLM logged profiling Llama-3.1-8B at a
        20k-token batch on one GPU (vllm-project/vllm issue #10517); smaller profile
        batches and TP shards need less, so this errs towards calling arms infeasible
    kv_bytes_per_token : override of :func:`kv_bytes_per_token`
    """

    value_per_token_usd: float = 2e-7
    prices_usd_per_gpu_h: dict = field(default_factory=default_prices)
    usd_per_kwh: float = 0.08
    runtime_h: float = 1.0
    queue_weight: float = 1.0
    restart_h: float = 0.5
    default_launch_success: float = 0.95
    kv_knee: float = 0.85
    kv_slope: float = 2.0
    gpu_mem_util: float = 0.9
    overhead_gb_per_gpu: float = 2.6
    kv_bytes_per_token: float | None = None


@dataclass(frozen=True)
class Request:
    """A launch question: which arm for this model and workload?

    Attributes
    ----------
    model : model name (catalog or custom)
    params_b, active_params_b : parameters, billions (active: MoE experts used per token)
    concurrency : concurrent sequences; in_len, out_len : tokens per request
    task : workload family of the benchmark catalog (``lm-arena-chat``, ``argonne-offline`` ...)
    ttft_slo_ms, itl_slo_ms : SLOs (None: no SLO)
    """

    model: str
    params_b: float
    concurrency: float
    in_len: float
    out_len: float
    active_params_b: float | None = None
    task: str = "lm-arena-chat"
    framework: str = "vLLM"
    ttft_slo_ms: float | None = None
    itl_slo_ms: float | None = None


ARM_TP = (1, 2, 4, 8)
#: arm precisions: the paper's bf16 / FP8 / AWQ / GPTQ (Sec. 3.1) plus fp16 and int8 weights
#: (the Argonne Fig. 3 tables measure int8 SmoothQuant on A100 with TensorRT-LLM). A precision
#: never measured on a GPU kind (AWQ and GPTQ nowhere in the staged data) is outside measured
#: support there: the arm abstains and is listed flagged, never ranked (no invented numbers).
ARM_PRECISIONS = ("bf16", "fp16", "fp8", "int8", "awq", "gptq")


def arms(hardware_keys=None) -> pd.DataFrame:
    """The arm grid: hardware x TP in {1, 2, 4, 8} x :data:`ARM_PRECISIONS`."""
    keys = list(hardware_keys or hardware.CATALOG)
    return pd.DataFrame([{"hardware": h, "tp": t, "precision": p}
                         for h in keys for t in ARM_TP for p in ARM_PRECISIONS])


def memory_check(req: Request, arm: dict, u: UtilityParams) -> dict:
    """Weights, KV need and occupancy (GB) of one arm; ``feasible`` and ``why`` if not
    (:func:`memory_fit`)."""
    return memory_fit(req.params_b, req.concurrency, req.in_len + req.out_len, arm, u)


#: ``2 * z_0.9`` of the standard normal: q10 and q90 are this many sigmas apart (log space);
#: ``scipy.special`` (``ndtri``, ``ndtr``) gives the same values as ``scipy.stats.norm``
#: (``ppf``, ``sf(x) = ndtr(-x)``) without importing ``scipy.stats``.
_Q10_Q90_SIGMAS = 2 * special.ndtri(0.9)


def kv_factor(occupancy: float | None, u: UtilityParams) -> float:
    """Throughput factor of the KV-saturation penalty, ``1 - kv_slope * (min(occupancy, 1) -
    kv_knee)`` above the knee, 1 below it or without an occupancy. An occupancy above 1 is a
    full cache: the scheduler holds ``kv_seqs`` sequences and queues or preempts the rest
    (:func:`memory_fit`), so the penalty stays at its value for a full cache (0.7 at the
    defaults) and the throughput is the cost model's at the offered concurrency (fitted on
    benchmarks that ran past their cache, preemption included: on the staged Argonne runs of
    Llama-2-70B on 4 x A100-40GB, 1,024 + 1,024 tokens, whose cache holds 7 such sequences,
    median throughput still rises 255 / 285 / 365 tok/s at 16 / 32 / 64 sequences)."""
    if occupancy is None or not np.isfinite(occupancy):
        return 1.0
    return max(0.0, 1.0 - u.kv_slope * max(0.0, min(occupancy, 1.0) - u.kv_knee))


def p_exceed(q10: float, q50: float, q90: float, slo: float) -> float:
    """P(value > slo) under a log-normal with median q50 and q10 / q90 as its 10 / 90 % points.

    >>> round(p_exceed(50, 100, 200, 100), 3)
    0.5
    """
    if not all(np.isfinite([q10, q50, q90])) or q50 <= 0:
        return float("nan")
    sigma = max((math.log(q90) - math.log(q10)) / _Q10_Q90_SIGMAS, 1e-9)
    return float(special.ndtr(-((math.log(slo) - math.log(q50)) / sigma)))  # normal tail


def utility(throughput_tok_s: float, power_w: float | None, n_gpus: int, hw: str,
            occupancy: float | None, p_slo: float, p_launch: float, wait_h: float,
            u: UtilityParams) -> dict:
    """Utility terms of one arm (USD over ``runtime_h``); ``utility`` is NaN without a price."""
    price = u.prices_usd_per_gpu_h.get(hw)
    spec = hardware.CATALOG.get(hw)
    if power_w is None or not np.isfinite(power_w):
        power_w = n_gpus * spec.tdp_w if spec and spec.tdp_w else 0.0  # TDP bound
    kvf = kv_factor(occupancy, u)
    p_slo = 0.0 if not np.isfinite(p_slo) else p_slo
    value = u.value_per_token_usd * throughput_tok_s * kvf * (1 - p_slo) * 3600 * u.runtime_h
    served = throughput_tok_s * kvf * (1 - p_slo) * 3600 * u.runtime_h  # U is linear in value
    if price is None:
        return {"value_usd": value, "compute_usd": float("nan"), "queue_usd": float("nan"),
                "failure_usd": float("nan"), "kv_factor": kvf, "served_tokens": served,
                "utility": float("nan")}
    rate = n_gpus * price + power_w / 1000 * u.usd_per_kwh
    compute = rate * u.runtime_h
    queue = u.queue_weight * wait_h * rate
    failure = (1 - p_launch) * u.restart_h * rate
    return {"value_usd": value, "compute_usd": compute, "queue_usd": queue,
            "failure_usd": failure, "kv_factor": kvf, "served_tokens": served,
            "utility": value - compute - queue - failure}


@dataclass(frozen=True)
class Context:
    """Job-history terms: launch-success priors and queue waits (may be empty).

    The lookup tables (:class:`~analytics.advisor.priors.LaunchTable`,
    :class:`~analytics.advisor.priors.WaitTable`) are built once here, so scoring an arm is a
    dict lookup. The launch prior is per (GPU kind, GPU count), shrunk to the pooled rate
    (OmniPilot Sec. 3.3.2 / 5.2; :mod:`analytics.advisor.priors`); an arm whose kind has no job
    history at its count gets that count's rate pooled over kinds, else the prior mean.
    """

    priors: pd.DataFrame = field(default_factory=pd.DataFrame)
    waits: pd.DataFrame = field(default_factory=pd.DataFrame)
    launch: pr.LaunchTable = field(init=False, repr=False, compare=False)
    wait_table: pr.WaitTable = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "launch", pr.LaunchTable.from_priors(self.priors))
        object.__setattr__(self, "wait_table", pr.WaitTable.from_waits(self.waits))

    def p_launch(self, n_gpus: int, hw: str, u: UtilityParams) -> float:
        p = self.launch.get(n_gpus, hw)
        return u.default_launch_success if p is None else p

    def wait_h(self, n_gpus: int) -> float:
        return self.wait_table.get(n_gpus)




def p_exceed_many(q10, q50, q90, slo: float) -> np.ndarray:
    """:func:`p_exceed` for arrays of quantiles (one normal tail call for all arms); NaN where
    a quantile is not finite or q50 <= 0."""
    z = []
    for lo, mid, hi in zip(q10, q50, q90, strict=True):
        if not (math.isfinite(lo) and math.isfinite(mid) and math.isfinite(hi)) or mid <= 0:
            z.append(math.nan)
            continue
        sigma = max((math.log(hi) - math.log(lo)) / _Q10_Q90_SIGMAS, 1e-9)
        z.append((math.log(slo) - math.log(mid)) / sigma)
    return np.asarray(special.ndtr(-np.asarray(z, dtype=float)), dtype=float)


def utility_many(throughput_tok_s, power_w, n_gpus, hw, occupancy, p_slo, p_launch, wait_h,
                 u: UtilityParams) -> dict[str, np.ndarray]:
    """:func:`utility` for arrays (one entry per arm, same arithmetic in the same order); NaN
    power falls back to the TDP bound, NaN occupancy to no KV penalty, occupancy above 1 to a
    full cache (:func:`kv_factor`), NaN ``p_slo`` to 0."""
    thr = np.asarray(throughput_tok_s, dtype=float)
    n = np.asarray(n_gpus)
    specs = [hardware.CATALOG.get(h) for h in hw]
    tdp = np.array([s.tdp_w if s and s.tdp_w else 0.0 for s in specs], dtype=float)
    pw = np.asarray(power_w, dtype=float)
    pw = np.where(np.isfinite(pw), pw, np.where(tdp > 0, n * tdp, 0.0))
    occ = np.minimum(np.asarray(occupancy, dtype=float), 1.0)  # NaN stays NaN: a full cache
    kvf = np.where(np.isfinite(occ),
                   np.maximum(0.0, 1.0 - u.kv_slope * np.maximum(0.0, occ - u.kv_knee)), 1.0)
    ps = np.asarray(p_slo, dtype=float)
    ps = np.where(np.isfinite(ps), ps, 0.0)
    value = u.value_per_token_usd * thr * kvf * (1 - ps) * 3600 * u.runtime_h
    served = thr * kvf * (1 - ps) * 3600 * u.runtime_h  # tokens: U is linear in value/token
    price = np.array([u.prices_usd_per_gpu_h.get(h, np.nan) for h in hw], dtype=float)
    rate = n * price + pw / 1000 * u.usd_per_kwh
    compute = rate * u.runtime_h
    queue = u.queue_weight * np.asarray(wait_h, dtype=float) * rate
    failure = (1 - np.asarray(p_launch, dtype=float)) * u.restart_h * rate
    return {"value_usd": value, "compute_usd": compute, "queue_usd": queue,
            "failure_usd": failure, "kv_factor": kvf, "served_tokens": served,
            "utility": value - compute - queue - failure}


def _arm_grid(req: Request, hardware_keys) -> pd.DataFrame:
    grid = arms(hardware_keys)
    grid["n_gpus"] = grid["tp"]
    grid["pp"] = 1
    for k in ("model", "params_b", "concurrency", "in_len", "out_len", "task", "framework"):
        grid[k] = getattr(req, k)
    grid["active_params_b"] = req.active_params_b if req.active_params_b else req.params_b
    return grid


SLO_TARGETS = {"ttft_slo_ms": "ttft_ms", "itl_slo_ms": "itl_ms"}


def p_slo(frame: pd.DataFrame, slos: dict, measured: bool = False) -> np.ndarray:
    """Probability per arm that TTFT or ITL exceeds its SLO, ``1 - prod(1 - p_target)``.

    Parameters
    ----------
    frame : one row per arm; predicted ``<target>_q10/_q50/_q90`` columns (``measured``
        False: log-normal tail, :func:`p_exceed_many`) or the measured ``<target>`` column
        (``measured`` True: 1 where the measurement exceeds the SLO, else 0)
    slos : ``{"ttft_ms": slo_ms or None, "itl_ms": slo_ms or None}``

    A target without a column or a value (NaN) adds 0: the live ranking and the backtest
    share this rule (issue 18 item 3).
    """
    out = np.zeros(len(frame))
    for tgt, slo in slos.items():
        if not slo:
            continue
        if measured:
            if tgt not in frame:
                continue
            v = frame[tgt].to_numpy(dtype=float)
            pe = np.where(np.isnan(v), np.nan, (v > slo).astype(float))
        elif f"{tgt}_q50" in frame:
            pe = p_exceed_many(*(frame[f"{tgt}_{q}"].tolist() for q in ("q10", "q50", "q90")),
                               slo)
        else:
            continue
        out = 1 - (1 - out) * (1 - np.where(np.isnan(pe), 0.0, pe))
    return out


def slo_models(cost: cm.CostModel, req: Request) -> dict:
    """Which SLO of the request has a fitted model, on how many folds and cells, and whether
    the request lies inside that target's measured support.

    Returns
    -------
    dict target (``ttft_ms``, ``itl_ms``) -> ``{slo_ms, fitted, rows, cells, folds,
    coverage_held_out_cell, outside_support, note}``; ``note`` is a sentence for the page:
    an SLO without a model adds no violation term (the ranking ignores it), one outside the
    target's support is an extrapolation.
    """
    out = {}
    row = {"hardware": None, "precision": None, "task": req.task, "framework": req.framework,
           "params_b": req.params_b, "concurrency": req.concurrency, "in_len": req.in_len,
           "out_len": req.out_len}
    for key, tgt in SLO_TARGETS.items():
        m, slo = cost.metrics.get(tgt, {}), getattr(req, key)
        fitted = bool(m.get("fitted")) and tgt in cost.models
        axis = cm.outside(m["support"], row) if fitted and "support" in m else None
        if not fitted:
            note = (f"no {tgt} model ({m.get('reason') or 'target not fitted'}): "
                    + ("the SLO is not applied" if slo else "an SLO would not be applied"))
        elif axis:
            note = f"{tgt} model extrapolates: {axis}"
        else:
            note = None
        out[tgt] = {"slo_ms": slo, "fitted": fitted, "rows": m.get("rows"),
                    "cells": m.get("cells"), "folds": m.get("folds"),
                    "coverage_held_out_cell": m.get("coverage", {}).get("held_out_cell"),
                    "outside_support": axis, "note": note}
    return out


def _p_slo(req: Request, preds: pd.DataFrame) -> np.ndarray:
    """Probability per arm that TTFT or ITL exceeds its SLO (0 where a target is missing)."""
    return p_slo(preds, {"ttft_ms": req.ttft_slo_ms, "itl_ms": req.itl_slo_ms})


def score_arms(arms_df: pd.DataFrame, throughput_tok_s, power_w, p_slo_arm,
               u: UtilityParams, ctx: Context) -> tuple[list[dict], dict]:
    """Memory model and utility terms of many arms: the one scoring path of the live ranking
    (:func:`advise`) and of the backtest (:mod:`analytics.advisor.backtest`).

    Parameters
    ----------
    arms_df : one row per arm: hardware, tp, precision, n_gpus, params_b, concurrency,
        in_len, out_len (tokens; NaN in_len: no KV term, :func:`memory_fit`)
    throughput_tok_s, power_w : per arm (NaN power: TDP bound)
    p_slo_arm : per arm probability of an SLO violation (:func:`p_slo`)

    Returns
    -------
    (mems, terms): :func:`memory_fit` dict per arm; ``terms`` = :func:`utility_many` output plus
    ``occupancy`` (KV need / capacity, above 1 where the cache caps the concurrency; the KV
    factor counts it as 1), ``p_slo``, ``p_launch`` and ``wait_h`` arrays.
    """
    hw, tp = arms_df["hardware"].tolist(), arms_df["tp"].tolist()
    tokens = (arms_df["in_len"].astype(float) + arms_df["out_len"].astype(float)).tolist()
    n = arms_df["n_gpus"].tolist()
    mems = [memory_fit(float(pb), float(c), tok,
                       {"hardware": h, "tp": t, "precision": p, "n_gpus": k}, u)
            for h, t, p, k, pb, c, tok in zip(hw, tp, arms_df["precision"], n,
                                              arms_df["params_b"], arms_df["concurrency"],
                                              tokens, strict=True)]
    occ = np.array([np.nan if m["occupancy"] is None else m["occupancy"] for m in mems],
                   dtype=float)
    p_launch = np.array([ctx.p_launch(k, h, u) for h, k in zip(hw, n, strict=True)], dtype=float)
    wait = np.array([ctx.wait_h(k) for k in n], dtype=float)
    terms = utility_many(throughput_tok_s, power_w, n, hw, occ, p_slo_arm, p_launch, wait, u)
    return mems, {**terms, "occupancy": occ, "p_slo": np.asarray(p_slo_arm, dtype=float),
                  "p_launch": p_launch, "wait_h": wait}


#: :func:`memory_fit` fields the ranking carries per arm (after ``occupancy``).
_KV_COLUMNS = ("overhead_gb", "kv_capacity_gb", "kv_seqs", "kv_concurrency", "kv_note")


def advise(cost: cm.CostModel, req: Request, u: UtilityParams | None = None,
           ctx: Context | None = None, hardware_keys=None) -> pd.DataFrame:
    """Score every arm for a request (all arms at once: one prediction per target and
    quantile, array arithmetic for the utility, table lookups for priors and waits).

    Returns
    -------
    DataFrame, one row per arm: hardware, tp, precision, n_gpus, feasible, why_infeasible,
    abstain, abstain_axis, weights_gb, kv_gb, occupancy, overhead_gb, kv_capacity_gb,
    kv_seqs, kv_concurrency, kv_note ("KV cache holds N of M concurrent sequences" where the
    cache caps the request's concurrency, :func:`memory_fit`), ``<target>_q10/_q50/_q90``, p_slo,
    p_launch, wait_h, utility terms (USD), ``served_tokens`` (tokens the arm serves over the
    runtime: ``utility`` is linear in value per token with this slope), ``utility``, ``rank``
    (1 = best; only feasible, priced arms inside the envelope are ranked), ``fallback``
    (rule-based pick when every arm abstains), ``support`` ("measured", or "outside measured
    support (axis X)": the paper's low-confidence flag, Sec. 3.1). Row order: ranked arms by
    rank, then abstaining feasible priced arms by utility (never ranked: shown flagged), then
    the rest.
    """
    u = u or UtilityParams()
    ctx = ctx or Context()
    grid = _arm_grid(req, hardware_keys)
    preds = cm.predict(cost, grid).reset_index(drop=True)
    base = grid.head(1).to_dict("records")[0] if len(grid) else {}
    hw, tp, prec = grid["hardware"].tolist(), grid["tp"].tolist(), grid["precision"].tolist()
    axes = [cm.outside(cost.envelope, {**base, "hardware": h, "tp": t, "precision": p,
                                       "n_gpus": t})
            for h, t, p in zip(hw, tp, prec, strict=True)]
    nan = np.full(len(grid), np.nan)
    thr = preds["throughput_tok_s_q50"].to_numpy() if "throughput_tok_s_q50" in preds else nan
    pw = preds["power_w_q50"].to_numpy() if "power_w_q50" in preds else nan
    mems, terms = score_arms(grid, thr, pw, _p_slo(req, preds), u, ctx)
    occ = [m["occupancy"] for m in mems]
    out = pd.DataFrame({
        "hardware": hw, "tp": grid["tp"], "precision": prec, "n_gpus": grid["n_gpus"],
        "feasible": [m["feasible"] for m in mems], "why_infeasible": [m["why"] for m in mems],
        "abstain": [a is not None for a in axes], "abstain_axis": [a or "" for a in axes],
        "priced": [h in u.prices_usd_per_gpu_h for h in hw],
        "weights_gb": [m["weights_gb"] for m in mems], "kv_gb": [m["kv_gb"] for m in mems],
        "occupancy": occ, **{k: [m[k] for m in mems] for k in _KV_COLUMNS},
        **{c: preds[c] for c in preds.columns},
        **{k: terms[k] for k in ("p_slo", "p_launch", "wait_h")},
        **{k: v for k, v in terms.items() if k not in ("occupancy", "p_slo", "p_launch",
                                                        "wait_h")}})
    return ranked(out, req)


def ranked(out: pd.DataFrame, req: Request) -> pd.DataFrame:
    """Rank scored arms (``out``: :func:`advise`'s columns up to ``utility``) and order them as
    :func:`advise` returns them: adds ``rank`` (1 = best: feasible, priced, inside the
    envelope), ``fallback`` (:func:`rule_fallback` when no arm ranks) and ``support``; rows:
    ranked arms by rank, then abstaining arms that would be rankable (best utility first), then
    the rest."""
    rankable = out["feasible"] & ~out["abstain"] & out["utility"].notna()
    out["rank"] = np.nan
    order = out[rankable].sort_values("utility", ascending=False).index
    out.loc[order, "rank"] = np.arange(1, len(order) + 1)
    out["fallback"] = False
    if not rankable.any():
        fb = rule_fallback(out, req)
        if fb is not None:
            out.loc[fb, "fallback"] = True
    out["support"] = [f"outside measured support (axis {a.split(' ', 1)[0]})" if a else
                      "measured" for a in out["abstain_axis"]]
    flagged = out["feasible"] & out["abstain"] & out["utility"].notna()
    out["_g"] = np.where(rankable, 0, np.where(flagged, 1, 2))
    out["_u"] = np.where(flagged, -out["utility"], np.nan)
    return out.sort_values(["_g", "rank", "_u", "feasible", "abstain", "hardware", "tp"],
                           ascending=[True, True, True, False, True, True, True],
                           na_position="last").drop(columns=["_g", "_u"]).reset_index(drop=True)


def rule_fallback(scored: pd.DataFrame, req: Request):
    """Rule-based pick when the model abstains everywhere: the cheapest feasible priced arm
    (fewest GPUs, then lowest price), preferring 16-bit weights. Returns an index or None."""
    ok = scored[scored["feasible"] & scored["priced"]]
    if ok.empty:
        return None
    return ok.assign(_bits=cm.bits(ok["precision"]).fillna(16.0) < 16,
                     _price=ok["compute_usd"]).sort_values(["_bits", "_price", "tp"]).index[0]


def with_prices(u: UtilityParams, prices: dict[str, float]) -> UtilityParams:
    """A copy of ``u`` with some prices added or changed."""
    return replace(u, prices_usd_per_gpu_h={**u.prices_usd_per_gpu_h, **prices})
