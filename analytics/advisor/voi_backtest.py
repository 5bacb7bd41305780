"""Sequential backtest of the value-of-information gate (:mod:`analytics.advisor.voi`) on the
staged benchmark grids: regret of the recommended arm against benchmark node-hours spent.

Set-up. Every measured (workload cell x arm) of a priced GPU kind in a cell with two or more such
arms is a benchmark that could have been run. Truth: its measured median throughput and power
(the existing advisor backtest's truth, :mod:`analytics.advisor.backtest`). Before any reveal the
belief of every arm is the cost model's **held-out-cell** prediction (``CostModel.oof``: the
``GroupKFold`` model that never saw the cell), read as a log-normal (:func:`voi.belief`), with
power at its held-out q50. Each seed draws a random subset of the cells (``subset`` share) as
the problem.

Loop. A policy picks one unrevealed benchmark, its node-hours are spent (:func:`voi.node_hours`:
the measured Argonne run time where recorded), and the arm's belief becomes its measurement
(``s = 0``; the measurement is the backtest's truth, so once every arm is revealed the
recommendation is the true best and the regret is 0). This is the local conjugate update of
:mod:`analytics.advisor.voi`, not a LightGBM refit. Measured on the staged grid (5,561 rows):
refitting only the three final throughput boosters takes 0.27 s CPU, the throughput fit with
its grouped folds and calibration 2.6 s; the default backtest makes about 8,500 reveals (4
policies x 5 runs x ~420 arms), so refits would take 40 minutes to hours, against about 2 s
for the whole backtest with the local update. After each reveal every cell recommends the
arm with the highest expected utility (:func:`voi.expected_utility`) and the regret is the
mean over cells of ``U_best - U_rec`` (USD over the runtime, true utilities; the gains are in
the same unit). The advisor backtest's relative regret, divided by ``|U_best|``, is available
(``metric="relative"``) but is dominated by the few cells whose best utility is near 0.

Policies: ``voi`` (largest expected gain per node-hour, :func:`voi.cell_gains`, among the
benchmarks whose gain exceeds ``epsilon_usd``; once none does, the gate stops, as the paper's
does, and the remaining benchmarks run cheapest first), ``uncertainty`` (widest log-space belief
``s``, cheapest first on ties), ``random`` (seeded order) and ``cheapest`` (fewest node-hours
first).

Curves: each run's regret after each reveal is read on a common node-hour grid (0, then
log-spaced from the cheapest single benchmark to the largest run's total: the regret of the last
reveal at or before each grid point); per policy the mean over seeds and the min / max band.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analytics.advisor import decide, voi
from analytics.advisor import model as cm

POLICIES = ("voi", "uncertainty", "random", "cheapest")


def arm_table(cost: cm.CostModel, ctx: decide.Context, bench: pd.DataFrame,
              u: decide.UtilityParams, p: voi.VoIParams) -> pd.DataFrame:
    """One row per measured (cell x priced arm) in cells with >= 2 such arms: ``cell``, arm,
    ``A``, ``C_pred`` / ``C_true`` (USD), ``mu0`` / ``s2`` (held-out belief), ``y_true``
    (log measured throughput), ``node_hours``, ``u_true`` (USD)."""
    o = cost.oof
    o = o[o["throughput_tok_s"].notna() & o["throughput_tok_s_q50"].notna()
          & o["hardware"].isin(list(u.prices_usd_per_gpu_h))]
    agg = {"throughput_tok_s": "median", "concurrency": "first", "out_len": "median",
           "n_gpus": "first", **{f"throughput_tok_s_q{q}": "median" for q in (10, 50, 90)}}
    for c in ("power_w", "power_w_q50"):
        if c in o:
            agg[c] = "median"
    t = o.groupby(["cell", *cm.ARM], as_index=False).agg(agg)
    t = t[t.groupby("cell")["hardware"].transform("size") >= 2].reset_index(drop=True)
    runs = cm.prepare(bench)
    runs = runs[runs["throughput_tok_s"].notna()].groupby(["cell", *cm.ARM], as_index=False)[
        "latency_s"].sum(min_count=1)
    t = t.merge(runs, on=["cell", *cm.ARM], how="left")
    t["mu0"], t["s2"] = voi.belief(t["throughput_tok_s_q10"], t["throughput_tok_s_q50"],
                                   t["throughput_tok_s_q90"])
    t["y_true"] = np.log(t["throughput_tok_s"].astype(float))
    nan = pd.Series(np.nan, index=t.index)
    t["A"], t["C_pred"] = voi.utility_terms(t["hardware"], t["n_gpus"],
                                            t.get("power_w_q50", nan), np.full(len(t), np.nan),
                                            u, ctx)
    t["C_true"] = voi.utility_terms(t["hardware"], t["n_gpus"], t.get("power_w", nan),
                                    np.full(len(t), np.nan), u, ctx)[1]
    t["u_true"] = t["A"] * t["throughput_tok_s"] - t["C_true"]
    t["node_hours"] = voi.node_hours(t["n_gpus"], t["concurrency"], t["out_len"],
                                     t["throughput_tok_s"], t["latency_s"], p)
    return t[t["s2"].notna()].reset_index(drop=True)


class _Run:
    """State of one sequential run over a set of arms (module docstring)."""

    def __init__(self, t: pd.DataFrame, tau2: float, metric: str = "usd"):
        self.metric = metric
        self.codes = t["cell"].astype("category").cat.codes.to_numpy()
        self.members = pd.Series(np.arange(len(t))).groupby(self.codes).apply(np.array).tolist()
        self.A, self.tau2 = t["A"].to_numpy(float), tau2
        self.mu, self.s2 = t["mu0"].to_numpy(float).copy(), t["s2"].to_numpy(float).copy()
        self.C = t["C_pred"].to_numpy(float).copy()
        self.y, self.c_true = t["y_true"].to_numpy(float), t["C_true"].to_numpy(float)
        self.u_true = t["u_true"].to_numpy(float)
        self.revealed = np.zeros(len(t), bool)
        self.gain = voi.cell_gains(self.codes, self.A, self.C, self.mu, self.s2, tau2)
        self.regret = np.array([self._cell_regret(m) for m in self.members])

    def _cell_regret(self, m: np.ndarray) -> float:
        util = voi.expected_utility(self.A[m], self.C[m], self.mu[m], self.s2[m])
        best, rec = self.u_true[m].max(), self.u_true[m][int(np.argmax(util))]
        if self.metric == "usd":
            return float(best - rec)
        return float((best - rec) / abs(best)) if best != 0 else 0.0

    def reveal(self, j: int) -> None:
        self.revealed[j] = True
        self.mu[j], self.s2[j], self.C[j] = self.y[j], 0.0, self.c_true[j]
        c = self.codes[j]
        m = self.members[c]
        self.gain[m] = voi.cell_gains(None, self.A[m], self.C[m], self.mu[m],
                                      self.s2[m], self.tau2)
        self.regret[c] = self._cell_regret(m)


def _pick(policy: str, run: _Run, hours: np.ndarray, order: np.ndarray,
          epsilon: float = 0.0) -> int:
    """Index of the next benchmark; ``order`` is the static order (random / cheapest)."""
    open_ = ~run.revealed
    if policy in ("random", "cheapest"):
        return int(order[open_[order]][0])
    if policy == "voi" and not (open_ & (run.gain > epsilon)).any():
        return int(order[open_[order]][0])  # the gate stops (sub-epsilon): cheapest next
    score = run.gain / hours if policy == "voi" else run.s2.copy()
    score = np.where(open_ & ((run.gain > epsilon) if policy == "voi" else True), score,
                     -np.inf)
    top = score.max()
    ties = np.flatnonzero(score >= top - abs(top) * 1e-12)
    return int(ties[np.argmin(hours[ties])])


def run_policy(t: pd.DataFrame, policy: str, tau2: float, seed: int = 0, metric: str = "usd",
               epsilon: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(cumulative node-hours, mean regret over cells) after 0, 1, ..., n reveals, shapes
    (n + 1,); ``metric`` "usd" (``U_best - U_rec``, USD over the runtime) or "relative"
    (divided by ``|U_best|``)."""
    run = _Run(t, tau2, metric)
    hours = t["node_hours"].to_numpy(float)
    cheap = np.argsort(hours, kind="stable")
    order = np.random.default_rng(seed).permutation(len(t)) if policy == "random" else cheap
    spent, regret = [0.0], [float(run.regret.mean())]
    for _ in range(len(t)):
        j = _pick(policy, run, hours, order, epsilon)
        run.reveal(j)
        spent.append(spent[-1] + hours[j])
        regret.append(float(run.regret.mean()))
    return np.array(spent), np.array(regret)


def on_grid(spent: np.ndarray, regret: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The regret of the last reveal at or before each grid point (a step function)."""
    idx = np.searchsorted(spent, grid, side="right") - 1
    return regret[np.clip(idx, 0, len(regret) - 1)]


#: Node-hour budgets at which the summary reads each policy's mean regret.
BUDGETS_NODE_H = (0.1, 0.5, 1.0, 2.0, 5.0)


def backtest(cost: cm.CostModel, ctx: decide.Context, bench: pd.DataFrame,
             u: decide.UtilityParams | None = None, p: voi.VoIParams | None = None,
             seeds: int = 5, subset: float = 0.5, points: int = 60) -> dict:
    """Regret-vs-node-hours curves of the four policies (module docstring); regret in USD
    over the runtime, ``U_best - U_recommended`` per cell, averaged over the cells.

    Parameters
    ----------
    cost, ctx, bench : fitted cost model (held-out-cell predictions), job-history context,
        ``bench_runs`` rows (for measured run times and replicate noise)
    u, p : utility terms and gate settings (``p.tau2`` None: :func:`voi.measurement_noise`;
        ``p.epsilon_usd``: the VoI policy's stopping threshold)
    seeds : hidden subsets (seed ``k`` draws the cells of run ``k`` and the random order)
    subset : share of the eligible cells in each run (1.0: every cell, the same every seed)
    points : node-hour grid points of the curves

    Returns
    -------
    dict: ``cells`` / ``arms`` (eligible), ``cells_per_run``, ``seeds``, ``tau2``,
    ``hours`` (grid, node-hours: 0 then log-spaced), ``curves`` {policy: {mean, lo, hi}}
    (mean regret over cells, USD, lists of ``points``; mean and min / max over the runs),
    ``summary`` {policy: {regret_start_usd, area_mean_regret_usd, regret_at_<B>h_usd for
    :data:`BUDGETS_NODE_H`, final_regret_usd}} (``area_mean_regret_usd``: the mean of the
    curve over the log-spaced grid, which weighs small budgets as much as large ones; lower
    is better), ``best_policy`` (lowest area), ``total_node_hours`` (largest run).
    """
    u, p = u or decide.UtilityParams(), p or voi.VoIParams()
    t = arm_table(cost, ctx, bench, u, p)
    tau2 = voi.measurement_noise(cm.prepare(bench)) if p.tau2 is None else float(p.tau2)
    cells = np.array(sorted(t["cell"].unique()))
    empty = {"cells": int(len(cells)), "arms": int(len(t)), "seeds": 0, "tau2": tau2,
             "epsilon_usd": p.epsilon_usd, "hours": [], "curves": {}, "summary": {},
             "best_policy": None, "cells_per_run": 0, "total_node_hours": 0.0}
    if len(cells) == 0:
        return empty
    k = max(1, int(round(len(cells) * subset)))
    raw = {name: [] for name in POLICIES}
    for s in range(seeds):
        pick = set(np.random.default_rng(s).permutation(cells)[:k]) if k < len(cells) \
            else set(cells)
        sub = t[t["cell"].isin(pick)].reset_index(drop=True)
        for name in POLICIES:
            raw[name].append(run_policy(sub, name, tau2, s, "usd", p.epsilon_usd))
    total = max(r[0][-1] for runs in raw.values() for r in runs)
    grid = np.concatenate([[0.0], np.geomspace(float(t["node_hours"].min()), total, points - 1)])
    curves, summary = {}, {}
    for name, runs in raw.items():
        m = np.vstack([on_grid(h, r, grid) for h, r in runs])
        mean = m.mean(axis=0)
        curves[name] = {"mean": mean.tolist(), "lo": m.min(axis=0).tolist(),
                        "hi": m.max(axis=0).tolist()}
        at = {f"regret_at_{b:g}h_usd": float(np.mean([on_grid(h, r, np.array([b]))[0]
                                                      for h, r in runs]))
              for b in BUDGETS_NODE_H}
        summary[name] = {"regret_start_usd": float(mean[0]),
                         "area_mean_regret_usd": float(mean.mean()), **at,
                         "final_regret_usd": float(mean[-1])}
    best = min(summary, key=lambda n: summary[n]["area_mean_regret_usd"])
    return {**empty, "seeds": seeds, "cells_per_run": k, "hours": grid.tolist(),
            "curves": curves, "summary": summary, "best_policy": best,
            "total_node_hours": float(total)}
