"""The heterogeneous GPU mix: integer GPU counts per period at minimum cost, power or carbon.

Owns the per-GPU objective coefficients (:func:`kind_weights`), the MILP (:func:`allocate`,
``scipy.optimize.milp`` with HiGHS) and the hourly mix table of a capacity plan
(:func:`hourly_mix`). Method source: "Conformal GPU Demand Envelopes and Power-Aware Scheduling
..." (abstract): per period, integer GPU counts ``n_k`` with ``sum_k n_k * r_k >= c`` at minimum
cost, power or carbon, with ``n_k <= available_k``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analytics.config import GPUKind
from analytics.hardware.power import gpu_power_w

OBJECTIVES = ("cost", "power", "carbon")


def kind_weights(kinds: list[GPUKind], objective: str, utilisation: float = 1.0,
                 gco2_per_kwh: float | None = None) -> np.ndarray:
    """Per-GPU objective coefficient for one hour: $ (cost), W (power) or gCO2 (carbon).

    Power per GPU = :func:`analytics.hardware.power.gpu_power_w` (``idle + (TDP - idle) *
    utilisation``; kinds without a measured idle power use TDP at any utilisation: an upper
    bound). Carbon = power (kW) x carbon intensity (gCO2/kWh).

    Returns ndarray of shape (n_kinds,).

    Raises ValueError for an unknown objective, a kind without a price under ``cost``, or a
    carbon objective without an intensity.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}")
    if objective == "cost":
        missing = [k.name for k in kinds if k.price_usd_per_h is None]
        if missing:
            raise ValueError(f"no price for {missing}; enter one or leave them out")
        return np.array([k.price_usd_per_h for k in kinds], float)
    power = np.array([gpu_power_w(k.idle_w, k.tdp_w, utilisation) for k in kinds], float)
    if objective == "power":
        return power
    if gco2_per_kwh is None:
        raise ValueError("the carbon objective needs a carbon intensity (gCO2/kWh)")
    return power / 1000 * gco2_per_kwh


def allocate(demand_units: np.ndarray, units_per_gpu: np.ndarray, weights: np.ndarray,
             available: np.ndarray | None = None) -> np.ndarray:
    """Cheapest integer GPU mix per period (MILP, HiGHS via ``scipy.optimize.milp``).

    Parameters
    ----------
    demand_units : ndarray (T,), capacity to cover per period
    units_per_gpu : ndarray (K,), what one GPU of each kind serves per period
    weights : ndarray (K,), objective per GPU (cost, power or carbon)
    available : ndarray (K,), most GPUs of each kind (default unlimited)

    Returns
    -------
    n_gpus : ndarray (T, K) of int, GPUs of each kind per period

    Raises
    ------
    ValueError : a period's demand cannot be covered with the available GPUs
    """
    from scipy.optimize import Bounds, LinearConstraint, milp  # on use: ~0.5 s to import

    demand_units = np.asarray(demand_units, float)
    per_gpu = np.asarray(units_per_gpu, float)
    w = np.asarray(weights, float)
    n_kinds = len(per_gpu)
    ub = np.full(n_kinds, np.inf) if available is None else np.asarray(available, float)
    n_gpus = np.zeros((len(demand_units), n_kinds), dtype=int)
    cache: dict[float, np.ndarray] = {}
    for t, d in enumerate(demand_units):
        if d <= 0:
            continue
        if d not in cache:
            res = milp(c=w, constraints=LinearConstraint(per_gpu[None, :], lb=d, ub=np.inf),
                       integrality=np.ones(n_kinds), bounds=Bounds(np.zeros(n_kinds), ub))
            if res.status != 0:
                raise ValueError(f"period {t}: demand {d:,.0f} cannot be covered by the "
                                 f"available GPUs ({res.message})")
            cache[d] = np.round(res.x).astype(int)
        n_gpus[t] = cache[d]
    return n_gpus


def hourly_mix(capacity_units: np.ndarray, ts: pd.Series, kinds: list[GPUKind], bin_s: int,
               objective: str = "cost", available: dict[str, int] | None = None,
               utilisation: float = 0.8, gco2_per_kwh: float | None = None
               ) -> tuple[pd.DataFrame, dict[str, str]]:
    """The GPU mix per hour covering the hour's peak-bin capacity.

    Parameters
    ----------
    capacity_units : ndarray (n_bins,), provisioned capacity per bin (demand units per bin)
    ts : bin start times, shape (n_bins,)
    kinds : GPU kinds, each with ``ref_tok_s`` (a GPU serves ``ref_tok_s * bin_s`` units a bin)
    objective : one of :data:`OBJECTIVES`; under ``cost`` kinds without a price are left out
    available : most GPUs per kind name (default unlimited)
    utilisation : GPU utilisation of the power model
    gco2_per_kwh : carbon intensity (needed by the carbon objective; adds ``kgco2``)

    Returns
    -------
    mix : DataFrame per hour: hour, capacity (peak bin of the hour), one GPU count column per
        kind, cost_usd, power_kw (at ``utilisation``), kgco2 when an intensity is given; empty
        when no kind is usable
    excluded : kind name -> why it was left out

    Raises
    ------
    ValueError : from :func:`kind_weights` and :func:`allocate`
    """
    excluded = {}
    if objective == "cost":
        excluded.update({k.name: "no price" for k in kinds if k.price_usd_per_h is None})
        kinds = [k for k in kinds if k.price_usd_per_h is not None]
    if not kinds:
        return pd.DataFrame(), excluded
    per_gpu = np.array([k.ref_tok_s * bin_s for k in kinds])
    w = kind_weights(kinds, objective, utilisation, gco2_per_kwh)
    hourly = pd.Series(capacity_units, index=pd.to_datetime(ts)).resample("1h").max()
    avail = None if not available else np.array(
        [available.get(k.name, np.inf) for k in kinds], float)
    n_gpus = allocate(hourly.to_numpy(), per_gpu, w, avail)
    mix = pd.DataFrame(n_gpus, columns=[k.name for k in kinds])
    mix.insert(0, "hour", hourly.index)
    mix.insert(1, "capacity", hourly.to_numpy())
    prices = np.array([k.price_usd_per_h or np.nan for k in kinds])
    watts = kind_weights(kinds, "power", utilisation)
    mix["cost_usd"] = n_gpus @ np.nan_to_num(prices)
    mix["power_kw"] = n_gpus @ watts / 1000
    if gco2_per_kwh is not None:
        mix["kgco2"] = mix["power_kw"] * gco2_per_kwh / 1000
    return mix, excluded
