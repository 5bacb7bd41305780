"""Value-of-information benchmark gate: which unmeasured (workload cell x arm) benchmarks are
worth their node-hours (OmniPilot paper, Sec. 5.4 / App. C.4, with its stated flaw fixed).

The paper's gate conditions a point-quantile model on a sampled outcome by shrinking the
interval while the median stays put, so the conditioned utility equals the unconditioned one and
the value of information is zero by construction (paper, App. C.4). Here a benchmark moves the
posterior **mean**:

Belief (per cell x arm, log space). The calibrated q10 / q50 / q90 of throughput
(:func:`analytics.advisor.model.predict`, or the held-out-cell predictions in the backtest) are
read as a normal in log space: ``mu = log q50``, ``s = (log q90 - log q10) / (2 z_0.9)``. A
measured arm is known: ``mu = log(measured median)``, ``s = 0``.

Observation (conjugate normal-normal update; Gelman et al., *Bayesian Data Analysis*, 3rd ed.,
Sec. 2.5). A benchmark reads ``y = log T + e``, ``e ~ N(0, tau^2)``, with ``tau^2`` the median
replicate variance of log throughput on the stored grid (about 1e-4, i.e. 1 %, on the staged
data) (:func:`measurement_noise`). Posterior: ``mu' = mu + s^2 / (s^2 + tau^2) (y - mu)``,
``s_p^2 = s^2 tau^2 / (s^2 + tau^2)``. Before the benchmark (preposterior, Raiffa & Schlaifer
1961), ``mu' ~ N(mu, s~^2)`` with ``s~^2 = s^4 / (s^2 + tau^2)``.

Utility. The advisor's utility (:func:`analytics.advisor.decide.utility_many`) is linear in
throughput: ``U = A T - C`` (``A`` USD per tok/s over the runtime, ``C`` the compute, queue and
failure cost). The decision uses the expected utility under the belief, ``A exp(mu + s^2/2) -
C`` (the log-normal mean), so the current expected utility is the mean of the posterior one (a
martingale: no value appears from the median/mean gap alone).

Expected gain (expected improvement of the cell's best expected utility after observing arm
``j``; the knowledge-gradient of Frazier, Powell & Dayanik 2008). With ``B`` the best expected
utility of the cell's other arms and ``F = exp(mu + s^2/2)``, the posterior expected utility of
``j`` is ``A exp(m) - C`` with ``m ~ N(mu + s_p^2/2, s~^2)``, so::

    gain_j = E[max(B, A e^m - C)] - max(B, A F - C)
           = A * (call(F, K, s~) if F < K else put(F, K, s~)),      K = (B + C) / A

with the log-normal call / put of forward ``F``, strike ``K``, total volatility ``s~`` (Black
1976): ``call = F N(d1) - K N(d2)``, ``put = K N(-d2) - F N(-d1)``, ``d1 = (log(F/K) + s~^2/2)
/ s~``, ``d2 = d1 - s~`` (the put-call parity form avoids the cancellation of the difference).
The closed form is the limit of the quadrature the paper does by Monte Carlo (K = 32 draws); it
is 0 when ``s~ = 0`` (a certain arm), when ``A <= 0``, when the cell has no other arm, or when
``K <= 0``; otherwise it is positive and grows with the uncertainty near the decision boundary.
Gains are myopic (one benchmark at a time) and per cell (a benchmark informs its own cell's
decision only): gains of two benchmarks are not additive.

Node-hours of a benchmark (explicit assumption, shown with the ranking): the arm occupies
``n_gpus / gpus_per_node`` of a node (8-GPU nodes) for ``setup_min`` minutes (weights load and
warm-up; default 5 min, an assumption, not a measurement) plus the run: the measured run time
where the staged grid records it (Argonne ``latency_s``, summed over the cell x arm's rows), else
one batch of ``concurrency`` requests of ``out_len`` tokens at the q50 throughput,
``concurrency x out_len / throughput`` (the relation Argonne's measured latencies satisfy: median
ratio 1.00 on the staged grid).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from analytics.advisor import decide
from analytics.advisor import model as cm

#: q10 and q90 of a normal lie this many sigmas apart.
_SIGMAS = 2 * special.ndtri(0.9)


@dataclass(frozen=True)
class VoIParams:
    """Settings of the gate.

    Attributes
    ----------
    budget_node_h : node-hours the ranking may spend (greedy cut by gain per node-hour; the
        paper's gate probes "with a 0.2 node-hour budget", App. C.4)
    depth : most benchmarks the gate selects (the paper's depth 3)
    setup_min : minutes of launch overhead per benchmark (assumption: weights load, warm-up)
    gpus_per_node : GPUs per node (node-hours = n_gpus / gpus_per_node x hours)
    tau2 : measurement-noise variance in log space; None = :func:`measurement_noise`
    epsilon_usd : smallest expected gain worth a benchmark (the paper's gate stops on
        sub-epsilon improvement with epsilon 0.05, App. C.4; its unit is not stated, read here
        as USD over the runtime)

    The paper's gate also stops on negative net value: a benchmark whose expected gain is
    below its own cost (its GPU-hours at the arm's price) is never selected.
    """

    budget_node_h: float = 0.2
    depth: int = 3
    setup_min: float = 5.0
    gpus_per_node: int = 8
    tau2: float | None = None
    epsilon_usd: float = 0.05


def belief(q10, q50, q90) -> tuple[np.ndarray, np.ndarray]:
    """(mu, s^2) in log space from calibrated quantiles, arrays of shape (n,); NaN where a
    quantile is missing or not positive."""
    q10, q50, q90 = (np.asarray(q, dtype=float) for q in (q10, q50, q90))
    ok = (q10 > 0) & (q50 > 0) & (q90 > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = np.where(ok, np.log(np.where(ok, q50, 1.0)), np.nan)
        s = np.where(ok, (np.log(np.where(ok, q90, 1.0)) - np.log(np.where(ok, q10, 1.0)))
                     / _SIGMAS, np.nan)
    return mu, np.maximum(s, 0.0) ** 2


def measurement_noise(rows: pd.DataFrame, value: str = "throughput_tok_s") -> float:
    """Typical replicate variance of ``log(value)``: the median over the groups of two or more
    rows measuring the same thing (cell x arm x framework x GPU count x dataset) of each
    group's sample variance; 0.0 without replicates.

    The median, not the pooled mean: a few groups disagree by 10x (Argonne ``All_results``,
    Intel Max1550 at batch 1: 6.6 vs 65 tok/s), a configuration the schema does not record
    rather than run-to-run noise, and they would dominate a pooled variance (0.25 vs the
    Argonne replicates' typical 1 %). ``rows`` (:func:`analytics.advisor.model.prepare`
    output) needs ``cell``, ``hardware``, ``tp``, ``precision`` and ``value``; ``framework``,
    ``n_gpus`` and ``dataset`` are used where present."""
    r = rows[rows[value].notna() & (rows[value] > 0)]
    if r.empty:
        return 0.0
    r = r.assign(_y=np.log(r[value].astype(float)))
    keys = ["cell", *cm.ARM] + [c for c in ("framework", "n_gpus", "dataset") if c in r]
    var = r.groupby(keys, sort=False, dropna=False)["_y"].var(ddof=1).dropna()
    return float(var.median()) if len(var) else 0.0


def expected_gain(A, C, mu, s2, tau2, B) -> np.ndarray:
    """Expected gain in the cell's best expected utility from observing each arm (module
    docstring), same units as ``A x throughput`` (USD over the runtime); arrays of shape (n,).

    Parameters
    ----------
    A : USD per tok/s; C : USD; mu, s2 : log-space belief; tau2 : measurement noise; B : best
    expected utility of the cell's other arms (-inf: no other arm). Scalars broadcast.
    """
    A, C, mu, s2, B, tau2 = np.broadcast_arrays(
        *(np.atleast_1d(np.asarray(x, dtype=float)) for x in (A, C, mu, s2, B, tau2)))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        denom = s2 + tau2
        st2 = np.where(denom > 0, s2 ** 2 / np.where(denom > 0, denom, 1.0), 0.0)
        st = np.sqrt(st2)
        F = np.exp(mu + s2 / 2)
        K = (B + C) / A
        ok = (A > 0) & (st > 0) & np.isfinite(B) & np.isfinite(F) & (K > 0)
        Ks = np.where(ok, K, 1.0)
        Ss = np.where(ok, st, 1.0)
        d1 = (np.log(np.where(ok, F, 1.0) / Ks) + Ss ** 2 / 2) / Ss
        d2 = d1 - Ss
        call = F * special.ndtr(d1) - Ks * special.ndtr(d2)
        put = Ks * special.ndtr(-d2) - F * special.ndtr(-d1)
        gain = A * np.where(F < Ks, call, put)
    return np.where(ok, np.maximum(gain, 0.0), 0.0)


def expected_utility(A, C, mu, s2) -> np.ndarray:
    """``A exp(mu + s^2 / 2) - C``: the expected utility under a log-normal throughput."""
    return np.asarray(A, float) * np.exp(np.asarray(mu, float) + np.asarray(s2, float) / 2) \
        - np.asarray(C, float)


def best_other(cells: np.ndarray, util: np.ndarray) -> np.ndarray:
    """Per row, the best ``util`` among the *other* rows of its cell (-inf when none); NaN
    utilities count as absent. ``cells`` integer codes, shape (n,)."""
    cells = np.asarray(cells)
    u = np.where(np.isfinite(util), util, -np.inf)
    frame = pd.DataFrame({"c": cells, "u": u})
    first = frame.groupby("c")["u"].transform("max").to_numpy()
    rank = frame.groupby("c")["u"].rank(method="first", ascending=False).to_numpy()
    second = frame.assign(u2=np.where(rank == 1, -np.inf, u)).groupby("c")["u2"] \
        .transform("max").to_numpy()
    return np.where(rank == 1, second, first)


def best_other_one(util: np.ndarray) -> np.ndarray:
    """:func:`best_other` for the rows of a single cell (plain numpy, for the backtest loop)."""
    u = np.where(np.isfinite(util), util, -np.inf)
    if len(u) < 2:
        return np.full(len(u), -np.inf)
    top = int(np.argmax(u))
    out = np.full(len(u), u[top])
    out[top] = np.max(np.delete(u, top))
    return out


def cell_gains(cells, A, C, mu, s2, tau2) -> np.ndarray:
    """:func:`expected_gain` of every row, its cell's other rows as the alternatives
    (``cells=None``: all rows are one cell)."""
    util = expected_utility(A, C, mu, s2)
    other = best_other_one(util) if cells is None else best_other(cells, util)
    return expected_gain(A, C, mu, s2, tau2, other)


def utility_terms(hw, n_gpus, power_w, occupancy, u: decide.UtilityParams,
                  ctx: decide.Context) -> tuple[np.ndarray, np.ndarray]:
    """(A, C) per arm: the advisor's utility is ``A x throughput - C``
    (:func:`analytics.advisor.decide.utility_many` at throughput 1 gives ``A`` as its value
    term; ``C`` = compute + queue + failure, none of which depends on throughput)."""
    hw, n = list(hw), np.asarray(n_gpus)
    p_launch = [ctx.p_launch(int(k), h, u) for h, k in zip(hw, n, strict=True)]
    wait = [ctx.wait_h(int(k)) for k in n]
    t = decide.utility_many(np.ones(len(hw)), power_w, n, hw, occupancy, np.zeros(len(hw)),
                            p_launch, wait, u)
    return t["value_usd"], t["compute_usd"] + t["queue_usd"] + t["failure_usd"]


def node_hours(n_gpus, concurrency, out_len, throughput, run_s, p: VoIParams) -> np.ndarray:
    """Node-hours of one benchmark per row (module docstring): ``n_gpus / gpus_per_node x
    (setup_min / 60 + run_s / 3600)``, ``run_s`` the measured run time where finite, else
    ``concurrency x out_len / throughput`` seconds."""
    est = np.asarray(concurrency, float) * np.asarray(out_len, float) \
        / np.asarray(throughput, float)
    run = np.where(np.isfinite(np.asarray(run_s, float)), np.asarray(run_s, float), est)
    run = np.where(np.isfinite(run), run, 0.0)
    return np.asarray(n_gpus, float) / p.gpus_per_node * (p.setup_min / 60 + run / 3600)


def budget_cut(order_hours: np.ndarray, budget: float) -> np.ndarray:
    """Greedy cut of benchmarks already sorted by gain per node-hour: True while the
    cumulative node-hours stay within ``budget``."""
    return np.cumsum(np.asarray(order_hours, float)) <= budget + 1e-12


def _cells(df: pd.DataFrame) -> pd.DataFrame:
    """One row per measured workload cell: model, task, framework, sizes and lengths."""
    return df.groupby("cell", as_index=False, sort=True).agg(
        model=("model", "first"), task=("task", "first"), framework=("framework", "first"),
        params_b=("params_b", "first"), active_params_b=("active_params_b", "first"),
        in_len=("in_len", "first"), out_len=("out_len", "median"),
        concurrency=("concurrency", "first"))


def _candidate_grid(cells: pd.DataFrame, cost: cm.CostModel, u: decide.UtilityParams
                    ) -> pd.DataFrame:
    """Cells x arms of :func:`analytics.advisor.decide.arms` on priced, measured GPU kinds and
    measured (GPU kind, precision) pairs, feasible by the advisor's memory model."""
    hw = [h for h in cost.envelope["categorical"]["hardware"] if h in u.prices_usd_per_gpu_h]
    if not hw:
        return pd.DataFrame()
    arms = decide.arms(hw)
    combos = set(cost.envelope["combos"])
    arms = arms[np.array([f"{h}/{p}" in combos for h, p in zip(
        arms["hardware"], arms["precision"], strict=True)], dtype=bool)]
    if arms.empty:
        return pd.DataFrame()
    grid = cells.merge(arms, how="cross")
    grid["n_gpus"], grid["pp"] = grid["tp"], 1
    mems = {}
    occ, feas = [], []
    for r in grid[["params_b", "concurrency", "in_len", "out_len", *cm.ARM]].itertuples(
            index=False):
        key = tuple(r)
        if key not in mems:
            req = decide.Request("m", r.params_b, r.concurrency,
                                 0.0 if pd.isna(r.in_len) else r.in_len, r.out_len)
            mems[key] = decide.memory_check(req, {"hardware": r.hardware, "tp": r.tp,
                                                  "precision": r.precision}, u)
        occ.append(mems[key]["occupancy"])
        feas.append(mems[key]["feasible"])
    grid["occupancy"] = [np.nan if o is None else o for o in occ]
    return grid[np.asarray(feas, bool)].reset_index(drop=True)


def rank_benchmarks(cost: cm.CostModel, ctx: decide.Context, bench: pd.DataFrame,
                    u: decide.UtilityParams | None = None, p: VoIParams | None = None,
                    model: str | None = None) -> tuple[pd.DataFrame, dict]:
    """Unmeasured (cell x arm) benchmarks ranked by expected gain per node-hour.

    Candidates: every measured workload cell x every arm on a priced, measured GPU kind and a
    measured (GPU kind, precision) pair, feasible by memory, not measured in that cell. The
    cell's decision is among its measured priced arms (known, ``s = 0``) and its candidates
    (calibrated predictions of the full model); gains are :func:`cell_gains`.

    Parameters
    ----------
    cost : fitted cost model (needs ``throughput_tok_s``; ``power_w`` used when fitted)
    ctx : launch priors and queue waits; bench : ``bench_runs`` rows
    u : utility terms; p : gate settings
    model : the model a launch is asked for (issue 31 item 7: the list ignored it): when it
        has measured cells, only its cells are candidates; otherwise every measured model's,
        and ``info["model_note"]`` says so

    Returns
    -------
    (DataFrame, info). One row per candidate, best first: model, task, in_len, out_len,
    concurrency, hardware, tp, precision, throughput_tok_s_q10/_q50/_q90, expected_gain_usd,
    node_hours, gain_per_node_hour, cum_node_hours (over the benchmarks whose gain exceeds
    ``epsilon_usd``, NaN for the others), probe_usd (the benchmark's GPU-hours at its list
    price), net_value_usd (gain - probe_usd), within_budget (gain > epsilon, net value > 0,
    the cumulative node-hours fit the budget and at most ``depth`` selected), current_best_arm.
    ``info``: tau2, cells, measured_arms, candidates, positive (gain > 0), above_epsilon,
    negative_net (net value <= 0), epsilon_usd, selected (within budget), budget_node_h, depth,
    setup_min, gpus_per_node.
    """
    u, p = u or decide.UtilityParams(), p or VoIParams()
    df = cm.prepare(bench)
    df = df[df["throughput_tok_s"].notna() & (df["throughput_tok_s"] > 0)]
    tau2 = measurement_noise(df) if p.tau2 is None else float(p.tau2)
    note = None
    if model is not None:
        mine = df[df["model"] == model]
        if len(mine):
            df = mine
            note = f"benchmarks of {model}, the model asked for ({mine['cell'].nunique()} cells)"
        else:
            note = (f"{model} has no measured cell: benchmarks of every measured model "
                    "(the closest evidence the advisor has)")
    grid = _candidate_grid(_cells(df), cost, u)
    cols = ["model", "task", "in_len", "out_len", "concurrency", "hardware", "tp", "precision",
            "throughput_tok_s_q10", "throughput_tok_s_q50", "throughput_tok_s_q90",
            "expected_gain_usd", "node_hours", "gain_per_node_hour", "probe_usd",
            "net_value_usd", "cum_node_hours", "within_budget", "current_best_arm"]
    info = {"tau2": tau2, "cells": int(df["cell"].nunique()), "measured_arms": 0,
            "candidates": 0, "positive": 0, "above_epsilon": 0, "epsilon_usd": p.epsilon_usd,
            "negative_net": 0, "selected": 0, "budget_node_h": p.budget_node_h,
            "depth": p.depth, "setup_min": p.setup_min,
            "gpus_per_node": p.gpus_per_node, "model_note": note}
    if grid.empty:  # no priced, measured GPU kind: nothing to benchmark
        return pd.DataFrame(columns=cols).astype({"within_budget": bool}), info
    meas = df.groupby(["cell", *cm.ARM], as_index=False).agg(
        thr=("throughput_tok_s", "median"), pw=("power_w", "median"))
    grid = grid.merge(meas, on=["cell", *cm.ARM], how="left")
    measured = grid["thr"].notna().to_numpy()
    pred = cm.predict(cost, grid)
    mu, s2 = belief(pred["throughput_tok_s_q10"], pred["throughput_tok_s_q50"],
                    pred["throughput_tok_s_q90"])
    mu = np.where(measured, np.log(grid["thr"].where(measured, 1.0)), mu)
    s2 = np.where(measured, 0.0, s2)
    pw_pred = pred["power_w_q50"] if "power_w_q50" in pred else np.nan
    power = np.where(measured & grid["pw"].notna(), grid["pw"], pw_pred)
    A, C = utility_terms(grid["hardware"], grid["n_gpus"], power, grid["occupancy"], u, ctx)
    codes = grid["cell"].astype("category").cat.codes.to_numpy()
    util = expected_utility(A, C, mu, s2)
    gain = expected_gain(A, C, mu, s2, tau2, best_other(codes, util))
    best_label = _best_labels(grid, codes, util)
    thr50 = pred["throughput_tok_s_q50"].to_numpy(float)
    hours = node_hours(grid["n_gpus"], grid["concurrency"], grid["out_len"], thr50,
                       np.full(len(grid), np.nan), p)
    out = grid.assign(**{c: pred[c] for c in ("throughput_tok_s_q10", "throughput_tok_s_q50",
                                              "throughput_tok_s_q90")},
                      expected_gain_usd=gain, node_hours=hours,
                      gain_per_node_hour=gain / hours, current_best_arm=best_label)
    out = out[~measured].sort_values(["gain_per_node_hour", "node_hours"],
                                     ascending=[False, True]).reset_index(drop=True)
    # the probe's own cost: its GPU-hours at the arm's list price (USD); net value = gain - cost
    price = out["hardware"].map(u.prices_usd_per_gpu_h).astype(float).to_numpy()
    out["probe_usd"] = out["node_hours"].to_numpy(float) * p.gpus_per_node * price
    out["net_value_usd"] = out["expected_gain_usd"] - out["probe_usd"]
    worth = ((out["expected_gain_usd"] > p.epsilon_usd) & (out["net_value_usd"] > 0)).to_numpy()
    out["within_budget"] = False
    cut = budget_cut(out.loc[worth, "node_hours"], p.budget_node_h)
    cut &= np.arange(len(cut)) < p.depth  # the gate's depth: at most p.depth probes
    out.loc[worth, "within_budget"] = cut
    out["cum_node_hours"] = np.where(worth, np.cumsum(np.where(worth, out["node_hours"], 0.0)),
                                     np.nan)
    info.update(measured_arms=int(measured.sum()), candidates=int(len(out)),
                positive=int((out["expected_gain_usd"] > 0).sum()),
                above_epsilon=int((out["expected_gain_usd"] > p.epsilon_usd).sum()),
                negative_net=int((out["net_value_usd"] <= 0).sum()),
                selected=int(out["within_budget"].sum()))
    return out[cols], info


def _best_labels(grid: pd.DataFrame, codes: np.ndarray, util: np.ndarray) -> np.ndarray:
    """Label of the arm with the highest expected utility in each row's cell."""
    u = np.where(np.isfinite(util), util, -np.inf)
    order = pd.Series(u).groupby(codes).idxmax()
    labels = (grid["hardware"] + " x" + grid["tp"].astype(str) + " " + grid["precision"])
    return labels.to_numpy()[order.reindex(codes).to_numpy()]
