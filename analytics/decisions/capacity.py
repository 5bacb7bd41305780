"""From a demand envelope to capacity: admission, calibrated overbooking, heterogeneous GPU mix.

Method source: "Conformal GPU Demand Envelopes and Power-Aware Scheduling ..." (abstract):
provisioned capacity follows the envelope's upper bound, a calibration-selected overbooking
factor trades bin-level SLO violations against GPUs (the paper: f = 0.80, 5.11 % violations),
and the demand above capacity is the workload shortfall (8.81 % there).

* **Admission**: capacity per bin ``c_t``; demand above it is not admitted.
  violation rate = share of bins with ``y_t > c_t``; shortfall = ``sum max(0, y_t - c_t)``,
  also as a fraction of ``sum y_t``.
* **Overbooking**: ``c_t = f * u_t`` with ``u_t`` the upper bound of the envelope's rolling
  conformal band on the test window (its window seeded with the calibration residuals and
  refreshed as bins arrive). Both windows read ONE out-of-sample residual stream
  (:func:`analytics.envelope.pipeline.residual_stream`): on a calibration bin ``u_t`` comes
  from the other calibration residuals (leave-one-out), never from in-sample fit residuals,
  which are far smaller (issue 18 item 9: mean |r| 610 fit vs 3,873 calibration on BurstGPT
  week 1) and made the calibration bands too narrow and ``f`` too large. ``f`` is chosen on
  the calibration window by Learn-then-Test (Angelopoulos et al. 2021): for each ``f`` on a
  grid, the binary loss ``1{y_t > f u_t}`` has a Hoeffding-Bentkus p-value for ``H0: risk(f) > target``
  (MAPIE ``compute_hoeffding_bentkus_p_value``, binary form); testing ``f`` from the largest
  down with fixed-sequence testing controls the family-wise error at ``delta``, and the
  smallest ``f`` still rejected is chosen. With probability ``1 - delta`` its violation risk on
  exchangeable future bins is at most the target.
* **GPU mix**: per period, integer GPU counts ``n_k`` with ``sum_k n_k * r_k >= c`` at minimum
  cost, power or carbon, with ``n_k <= available_k``: a MILP in :mod:`analytics.decisions.mix`.

Every function here is pure (no store reads).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analytics.config import GPUKind
from analytics.decisions.mix import hourly_mix
from analytics.envelope.online import leave_one_out_bounds
from analytics.envelope.pipeline import residual_stream
from analytics.envelope.repair import repair_band

FACTOR_GRID = np.round(np.arange(0.50, 2.001, 0.01), 2)


def violation_rate(y: np.ndarray, cap: np.ndarray) -> float:
    """Share of bins whose demand exceeds capacity.

    >>> violation_rate(np.array([5.0, 10.0, 15.0, 20.0]), np.array([10.0, 10.0, 10.0, 25.0]))
    0.25
    """
    return float(np.mean(np.asarray(y, float) > np.asarray(cap, float)))


def shortfall(y: np.ndarray, cap: np.ndarray) -> dict:
    """Demand not admitted: ``{"units": sum max(0, y - cap), "fraction": units / sum y}``.

    >>> shortfall(np.array([5.0, 10.0, 15.0, 20.0]), np.array([10.0, 10.0, 10.0, 25.0]))
    {'units': 5.0, 'fraction': 0.1}
    """
    y = np.asarray(y, float)
    units = float(np.maximum(0.0, y - np.asarray(cap, float)).sum())
    total = float(y.sum())
    return {"units": units, "fraction": units / total if total else 0.0}


def calibration_upper(stream: pd.DataFrame, alpha: float) -> np.ndarray:
    """Out-of-sample upper bound on each calibration bin of a residual stream.

    Bin ``t``'s band comes from the other calibration residuals
    (:func:`analytics.envelope.online.leave_one_out_bounds`), repaired like every envelope
    band (:func:`analytics.envelope.repair.repair_band`: clipped at 0, extended to the point),
    so the factor is learned on bands built as the test window's rolling band is: from
    out-of-sample residuals of the same model, never from its fit residuals.

    Parameters
    ----------
    stream : :func:`analytics.envelope.pipeline.residual_stream` (its calibration rows are used)
    alpha : miscoverage of the envelope

    Returns ndarray (n_cal,), in the target's unit.
    """
    cal = stream[stream["part"] == "calibration"]
    yhat = cal["yhat"].to_numpy(float)
    lo, hi = leave_one_out_bounds(yhat, cal["residual"].to_numpy(float), alpha)
    return repair_band(yhat, lo, hi, yhat)[1]


def ltt_bound(risk: np.ndarray, n: int, delta: float) -> np.ndarray:
    """Learn-then-Test upper confidence bound of each empirical risk: the smallest target on a
    0.001 grid whose Hoeffding-Bentkus p-value (binary loss) is at most ``delta``, i.e. the
    least target the test would certify at that risk (1.0 when none). The HB p-value falls as
    the target grows, so a factor is certified below a target on the grid exactly when its
    bound is at most that target.

    Returns ndarray of the shape of ``risk`` (a rate)."""
    from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value  # on use: sklearn

    targets = np.round(np.arange(0.001, 1.0, 0.001), 3)
    p = compute_hoeffding_bentkus_p_value(np.asarray(risk, float), n, targets, binary=True)
    ok = p <= delta
    return np.where(ok.any(axis=1), targets[np.argmax(ok, axis=1)], 1.0)


def choose_factor(y_cal: np.ndarray, u_cal: np.ndarray, violation_target: float = 0.05,
                  delta: float = 0.1, grid: np.ndarray = FACTOR_GRID) -> tuple[float | None,
                                                                             pd.DataFrame]:
    """Smallest overbooking factor whose violation risk is certified below ``violation_target``.

    Learn-then-Test with fixed-sequence testing from the largest factor down (see module doc).

    Parameters
    ----------
    y_cal : ndarray (n,), demand on the calibration window
    u_cal : ndarray (n,), envelope upper bound on the same bins (out of sample), >= 0
    violation_target : tolerated bin-level violation rate
    delta : probability that the certificate fails
    grid : candidate factors

    Returns
    -------
    factor : the chosen factor, or None if even the largest factor is not certified
    curve : DataFrame sorted by factor: factor, violation (empirical, calibration), p_value,
        ltt_bound (:func:`ltt_bound`), certified
    """
    y_cal, u_cal = np.asarray(y_cal, float), np.asarray(u_cal, float)
    grid = np.sort(np.asarray(grid, float))[::-1]
    risk = np.array([violation_rate(y_cal, f * u_cal) for f in grid])
    from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value  # on use: sklearn

    p = compute_hoeffding_bentkus_p_value(risk, len(y_cal), violation_target,
                                          binary=True)[:, 0]
    certified = np.zeros(len(grid), dtype=bool)
    for i, pv in enumerate(p):  # fixed-sequence: stop at the first non-rejection
        if pv > delta:
            break
        certified[i] = True
    curve = pd.DataFrame({"factor": grid, "violation": risk, "p_value": p,
                          "ltt_bound": ltt_bound(risk, len(y_cal), delta),
                          "certified": certified}).sort_values("factor", ignore_index=True)
    chosen = curve.loc[curve["certified"], "factor"]
    return (float(chosen.min()) if len(chosen) else None), curve


@dataclass
class Overbooking:
    """Result of :func:`overbook`.

    Attributes
    ----------
    factor : chosen f (None if no factor could be certified)
    curve : factor -> calibration and test violation rate, p-value, LTT bound, certified
    frame : calibration + test bins: ts, part, y, yhat, residual, upper, capacity, violated
    test : dict with violation_rate, shortfall_units, shortfall_fraction on the test window
    calibration : same on the calibration window
    violation_target : tolerated bin-level violation rate
    delta : Learn-then-Test failure probability
    """

    factor: float | None
    curve: pd.DataFrame
    frame: pd.DataFrame
    test: dict
    calibration: dict
    violation_target: float
    delta: float


def overbook(stream: pd.DataFrame, upper_test: np.ndarray, alpha: float = 0.1,
             violation_target: float = 0.05, delta: float = 0.1) -> Overbooking:
    """Choose the overbooking factor on the calibration window, then measure it on test.

    Parameters
    ----------
    stream : the out-of-sample residual stream,
        :func:`analytics.envelope.pipeline.residual_stream` (calibration rows, then test rows)
    upper_test : ndarray (n_test,), the envelope's rolling upper bound on the test bins (its
        window seeded with the stream's calibration residuals, refreshed with its test ones)
    alpha : miscoverage of the envelope whose upper bound is scaled
    violation_target, delta : tolerated violation rate and Learn-then-Test failure probability
    """
    n_cal = int((stream["part"] == "calibration").sum())
    upper = np.concatenate([calibration_upper(stream, alpha), np.asarray(upper_test, float)])
    y = stream["y"].to_numpy(float)
    factor, curve = choose_factor(y[:n_cal], upper[:n_cal], violation_target, delta)
    curve["test_violation"] = [violation_rate(y[n_cal:], f * upper[n_cal:])
                               for f in curve["factor"]]
    f = factor if factor is not None else float(curve["factor"].max())
    cap = f * upper
    frame = stream[["ts", "part", "y", "yhat", "residual"]].reset_index(drop=True).assign(
        upper=upper, capacity=cap, violated=y > cap)

    def summary(rows: slice) -> dict:
        s = shortfall(y[rows], cap[rows])
        return {"violation_rate": violation_rate(y[rows], cap[rows]),
                "violations": int(frame["violated"].to_numpy()[rows].sum()),
                "bins": int(len(y[rows])),
                "shortfall_units": s["units"], "shortfall_fraction": s["fraction"]}

    return Overbooking(factor, curve, frame, summary(slice(n_cal, None)),
                       summary(slice(0, n_cal)), violation_target, delta)


def n_gpus_needed(capacity_units: np.ndarray, units_per_gpu_per_bin: float) -> np.ndarray:
    """Number of GPUs of one kind to serve ``capacity_units`` per bin (ceil), shape like the
    input."""
    return np.ceil(np.maximum(np.asarray(capacity_units, float), 0) / units_per_gpu_per_bin)


def gpu_hours_vs_peak(capacity_units: np.ndarray, peak_units: float, units_per_gpu_per_bin: float,
                      bin_s: int) -> dict:
    """GPU-hours when provisioning follows the capacity per bin vs a flat peak provisioning.

    Returns ``{"envelope_gpu_h", "peak_gpu_h", "saved_gpu_h", "saved_fraction"}``.

    >>> gpu_hours_vs_peak(np.array([10.0, 30.0]), 40.0, 10.0, 3600)["saved_gpu_h"]
    4.0
    """
    env = float(n_gpus_needed(capacity_units, units_per_gpu_per_bin).sum() * bin_s / 3600)
    peak_n = float(n_gpus_needed(np.array([peak_units]), units_per_gpu_per_bin)[0])
    peak = peak_n * len(capacity_units) * bin_s / 3600
    return {"envelope_gpu_h": env, "peak_gpu_h": peak, "saved_gpu_h": peak - env,
            "saved_fraction": (peak - env) / peak if peak else 0.0}


def overbooking_of(result, violation_target: float = 0.05, delta: float = 0.1
                   ) -> tuple[Overbooking, float]:
    """:func:`overbook` on an envelope run's own out-of-sample residuals and rolling band, and
    the highest demand known before its test window (bins whose base forecast exists), the
    flat-peak provisioning's target; what :func:`plan` and the fleet plan
    (:mod:`analytics.decisions.fleet_plan`) provision from.

    Returns ``(overbooking, peak)``, the peak in the target's unit per bin."""
    s = result.series
    stream = residual_stream(s, result.params.base_model)  # the envelope's own residuals
    ob = overbook(stream, result.test["rolling_hi"].to_numpy(float), result.params.alpha,
                  violation_target, delta)
    known = (s["part"].to_numpy() != "test") & np.isfinite(s[result.params.base_model])
    return ob, float(s["y"].to_numpy(float)[known].max())


@dataclass
class CapacityPlan:
    """Everything the Capacity page and ``headroom capacity`` show.

    Attributes
    ----------
    overbooking : :class:`Overbooking`
    gpu_hours : DataFrame per GPU kind: envelope vs peak GPU-hours on the test window
    mix : DataFrame per test hour: capacity (units/h peak bin), GPU counts per kind, cost_usd,
        power_kw (at the utilisation), objective
    excluded : kinds left out and why
    unit : what capacity is counted in (weighted tokens or GPU-seconds per bin)
    """

    overbooking: Overbooking
    gpu_hours: pd.DataFrame
    mix: pd.DataFrame
    excluded: dict
    unit: str
    scale: float = 1.0


def plan(result, bin_s: int, kinds: list[GPUKind], demand_target: str = "weighted_tokens",
         violation_target: float = 0.05, delta: float = 0.1, objective: str = "cost",
         available: dict[str, int] | None = None, utilisation: float = 0.8,
         gco2_per_kwh: float | None = None, scale: float = 1.0) -> CapacityPlan:
    """Overbooking, GPU-hours saved and the hourly GPU mix for an envelope run.

    Parameters
    ----------
    result : :class:`analytics.envelope.pipeline.EnvelopeResult` (its base model's forecasts are used)
    bin_s : bin width (s)
    kinds : GPU kinds to consider; for a token target a kind needs ``ref_tok_s``
    demand_target : what the envelope counts: ``weighted_tokens`` (GPUs = tokens per bin /
        (ref_tok_s x bin_s)) or ``gpu_seconds`` (the trace's own GPUs: one GPU gives bin_s
        GPU-seconds per bin)
    violation_target, delta : tolerated bin-level violation rate and Learn-then-Test failure
        probability (see :func:`choose_factor`)
    objective : GPU mix objective, one of :data:`analytics.decisions.mix.OBJECTIVES`
    available : most GPUs per kind name
    utilisation : GPU utilisation for the power model (idle + (TDP - idle) x utilisation)
    gco2_per_kwh : carbon intensity for the carbon objective
    scale : traffic multiplier applied to capacity and peak before converting to GPUs (a
        scenario input: a public trace is one tenant's sample; BurstGPT's README suggests
        scaling its request rate to the system under study). Violations and shortfall
        fractions do not depend on it.

    Raises
    ------
    ValueError : from the GPU mix (uncoverable demand, a missing price or intensity)
    """
    ob, peak = overbooking_of(result, violation_target, delta)
    peak *= scale
    cap_test = ob.frame.loc[ob.frame["part"] == "test", "capacity"].to_numpy() * scale

    excluded = {}
    if demand_target == "gpu_seconds":
        # the trace's own GPUs: a GPU-second of demand is a GPU-second of capacity (no
        # datasheet value applies, so none is given)
        usable = [GPUKind(key="trace GPUs", vendor="", memory_gb=None, mem_bw_gbs=None,
                          bf16_tflops=None, fp8_tflops=None, tdp_w=None, sources=())]
        per_gpu = np.array([float(bin_s)])
    else:
        usable = [k for k in kinds if k.ref_tok_s]
        excluded.update({k.name: "no reference throughput" for k in kinds if not k.ref_tok_s})
        per_gpu = np.array([k.ref_tok_s * bin_s for k in usable])
    rows = [{"kind": k.name, **gpu_hours_vs_peak(cap_test, peak, r, bin_s)}
            for k, r in zip(usable, per_gpu, strict=True)]

    mix = pd.DataFrame()
    if demand_target != "gpu_seconds" and usable:
        ts_test = ob.frame.loc[ob.frame["part"] == "test", "ts"]
        mix, left_out = hourly_mix(cap_test, ts_test, usable, bin_s, objective, available,
                                   utilisation, gco2_per_kwh)
        excluded.update(left_out)
    return CapacityPlan(ob, pd.DataFrame(rows), mix, excluded,
                        "GPU-seconds" if demand_target == "gpu_seconds" else "weighted tokens",
                        scale)


def curve_json(curve: pd.DataFrame) -> list[dict]:
    """The factor / violation trade-off as strict-JSON records, by increasing factor: factor,
    violation_rate (calibration, empirical), ltt_bound (:func:`ltt_bound`), p_value, certified,
    test_violation_rate."""
    return [{"factor": float(r.factor), "violation_rate": float(r.violation),
             "ltt_bound": float(r.ltt_bound), "p_value": float(r.p_value),
             "certified": bool(r.certified), "test_violation_rate": float(r.test_violation)}
            for r in curve.itertuples()]


def to_json(p: CapacityPlan) -> dict:
    """The ``headroom capacity`` document (``docs/cli.md``): factor, test violation rate,
    shortfall, GPUs per kind, and ``curve`` (:func:`curve_json`), the factor / violation
    trade-off the factor was chosen on."""
    ob = p.overbooking
    gpu_hours = {r.kind: {"envelope_gpu_h": r.envelope_gpu_h, "peak_gpu_h": r.peak_gpu_h,
                          "saved_gpu_h": r.saved_gpu_h, "saved_fraction": r.saved_fraction}
                 for r in p.gpu_hours.itertuples()}
    out = {
        "overbooking_factor": ob.factor,
        "target_violation": ob.violation_target,
        "delta": ob.delta,
        "slo_violation_rate": ob.test["violation_rate"],
        "violations": ob.test["violations"],
        "test_bins": ob.test["bins"],
        "shortfall_fraction": ob.test["shortfall_fraction"],
        "shortfall_units": ob.test["shortfall_units"],
        "calibration_violation_rate": ob.calibration["violation_rate"],
        "unit": p.unit,
        "scale": p.scale,
        "gpus": gpu_hours,
        "excluded_kinds": p.excluded,
        "curve": curve_json(ob.curve),
    }
    if not p.mix.empty:
        kinds = [c for c in p.mix.columns
                 if c not in ("hour", "capacity", "cost_usd", "power_kw", "kgco2")]
        out["mix"] = {"hours": int(len(p.mix)), "gpu_hours": {k: int(p.mix[k].sum())
                                                              for k in kinds},
                      "cost_usd": float(p.mix["cost_usd"].sum()),
                      "energy_kwh": float(p.mix["power_kw"].sum())}
    return out
