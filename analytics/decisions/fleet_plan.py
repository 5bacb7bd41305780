"""Replicas over time under a stated risk (issue 30 item 2): the certified demand envelope of a
trace joined with the per-replica capacity of one measured arm at a latency SLO.

Demand side (conformal demand envelopes paper, Sec. 5): the provisioned demand of bin ``t`` is
``c_t = f * u_t``, the overbooking factor ``f`` chosen by Learn-then-Test on the calibration
window times the rolling conformal band's upper bound ``u_t``
(:func:`analytics.decisions.capacity.overbook`), so that with probability ``1 - delta`` the
share of bins whose demand exceeds ``c_t`` is at most ``eps``.

Capacity side: one replica of the arm serves ``C`` output tokens/s at the SLO
(:func:`analytics.decisions.fleet.arm_capacity`, the knee of its measured concurrency sweep, or
a lower bound of it). The plan launches

    replicas(t) = max(min_replicas, ceil(scale * c_t / (C * bin_s)))

so ``replicas(t) * C * bin_s >= scale * c_t``. A bin falls short only when its demand exceeds
``c_t`` or a replica delivers less than ``C``; by the union bound

    P(shortfall in a bin) <= eps + alpha_capacity,

``alpha_capacity`` being the probability that a replica's capacity is below ``C`` (0 for the
measured knee taken as exact: the benchmarks ran each concurrency once, so its run-to-run
spread is not measured and the plan says so). The two are not calibrated jointly.

The backtest replays the test window (bins the envelope never fitted on): a bin falls short
when its demand exceeds ``replicas(t) * C_real * bin_s``, ``C_real`` the measured knee.
Its rate is compared with the stated risk.

Units: demand in output (completion) tokens per bin, the unit the benchmarks measure
throughput in; energy from the benchmark's measured J per output token at the knee.
Every function here is pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analytics.decisions.capacity import Overbooking

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
#: The most replicas a plan holds in a bin (beyond it the scale is wrong, not the fleet; and
#: sums of replicas stay exact in int64).
MAX_REPLICAS = 1_000_000


@dataclass(frozen=True)
class ReplicaCapacity:
    """What one replica of the chosen arm serves.

    Attributes
    ----------
    tok_s : output tokens/s one replica is planned at (the knee, or a lower bound of it), > 0
    gpus : GPUs per replica (the arm's GPU count), >= 1
    measured_tok_s : the measured knee's output tokens/s (the backtest's delivered capacity);
        None: ``tok_s``
    alpha : probability that a replica delivers less than ``tok_s``, in [0, 1)
    basis : how ``tok_s`` was obtained (``measured knee``, ...), said in the document
    energy_per_token_j : measured J per output token at the knee (None: not measured)
    price_usd_per_gpu_h : price of one GPU-hour of the arm's kind (None: not stated)
    idle_w_per_gpu : power of a GPU that holds the weights and computes nothing, W (the
        catalog's measured idle power; None: not stated)
    """

    tok_s: float
    gpus: int = 1
    measured_tok_s: float | None = None
    alpha: float = 0.0
    basis: str = "measured knee"
    energy_per_token_j: float | None = None
    price_usd_per_gpu_h: float | None = None
    idle_w_per_gpu: float | None = None

    def __post_init__(self):
        if not (math.isfinite(self.tok_s) and self.tok_s > 0):
            raise ValueError(f"per-replica capacity must be a positive number of tokens/s, "
                             f"not {self.tok_s!r}")
        if int(self.gpus) < 1:
            raise ValueError(f"a replica needs at least one GPU, not {self.gpus!r}")
        if not 0.0 <= self.alpha < 1.0:
            raise ValueError(f"capacity risk must be in [0, 1), not {self.alpha!r}")

    @property
    def delivered_tok_s(self) -> float:
        """What a replica delivers in the backtest: the measured knee where known."""
        return float(self.measured_tok_s if self.measured_tok_s is not None else self.tok_s)

    @property
    def power_w(self) -> float | None:
        """Power of one replica at its knee, W = J/token x tokens/s (None: no energy)."""
        e = self.energy_per_token_j
        if e is None or not math.isfinite(e):
            return None
        return float(e) * self.delivered_tok_s


@dataclass
class FleetPlan:
    """Result of :func:`plan`.

    Attributes
    ----------
    frame : one row per calibration and test bin: ``ts``, ``part``, ``demand`` (output tokens
        in the bin: the grid's tokens x scale x output share), ``provisioned`` (``c_t``, the
        same), ``replicas``, ``served``
        (tokens the replicas deliver, ``replicas * C_real * bin_s``), ``shortfall`` (bool)
    by_hour : 24 rows, ``hour_utc``, ``replicas`` (most planned in that hour), ``bins``
    by_weekday_hour : 7 x 24 rows, ``weekday``, ``hour_utc``, ``replicas`` (NaN: no bin)
    risk : ``demand`` (eps), ``delta``, ``capacity`` (alpha), ``total``, ``rule``
    backtest : test window: ``bins``, ``shortfall_bins``, ``shortfall_rate``,
        ``shortfall_fraction`` (tokens not served / demanded), ``demand_violation_rate``
        (bins over ``c_t``), ``within_risk``
    economics : GPU-hours planned vs flat peak, $ per day, $ per 1M tokens, kWh, J/token,
        gCO2 per 1M tokens (None with a reason in ``notes`` where an input is unknown)
    notes : what was assumed or left out
    """

    frame: pd.DataFrame
    by_hour: pd.DataFrame
    by_weekday_hour: pd.DataFrame
    risk: dict
    backtest: dict
    economics: dict
    notes: list[str]
    replica: ReplicaCapacity
    bin_s: int
    scale: float
    min_replicas: int
    peak_replicas: int
    output_share: float = 1.0


def replicas_needed(units: np.ndarray, tok_s: float, bin_s: int, min_replicas: int = 1
                    ) -> np.ndarray:
    """Replicas that serve ``units`` output tokens per bin at ``tok_s`` tokens/s each
    (ceil, at least ``min_replicas``), shape of ``units``.

    >>> replicas_needed(np.array([0.0, 299.0, 301.0, 1200.0]), 1.0, 300).tolist()
    [1, 1, 2, 4]
    """
    per = float(tok_s) * int(bin_s)
    need = np.ceil(np.maximum(np.asarray(units, float), 0.0) / per - 1e-9)
    return np.maximum(need, int(min_replicas)).astype(int)


def plan(ob: Overbooking, peak_demand: float, replica: ReplicaCapacity, bin_s: int,
         scale: float = 1.0, min_replicas: int = 1, gco2_per_kwh: float | None = None,
         pue: float = 1.0, output_share: float = 1.0) -> FleetPlan:
    """Replicas per bin, their hour-of-day profile, the stated risk, the backtest and the cost.

    Parameters
    ----------
    ob : the envelope's overbooking (:func:`analytics.decisions.capacity.overbook`) on a grid
        of output tokens per bin; ``ob.factor`` None (no factor certified) is refused
    peak_demand : highest demand known before the test window (tokens per bin, unscaled): the
        flat-peak baseline provisions for it
    replica : the arm's per-replica capacity (:class:`ReplicaCapacity`)
    bin_s : bin width, s
    scale : traffic multiplier (a public trace is one tenant's sample), > 0
    min_replicas : fewest replicas kept up (a cold start takes minutes), >= 0
    gco2_per_kwh : carbon intensity of the site's grid (None: no carbon figure)
    pue : the site's power usage effectiveness, >= 1 (facility energy / IT energy)
    output_share : share of the grid's tokens that are output tokens, in (0, 1] (1: the grid
        counts output tokens; a pre-binned series of all tokens: its measured output share)

    Raises ValueError: no certified factor, a non-positive scale, a PUE below 1.
    """
    if ob.factor is None:
        raise ValueError(f"no overbooking factor certifies a violation rate of "
                         f"{ob.violation_target:g} at delta {ob.delta:g} on this trace's "
                         "calibration window: raise the risk or use a longer trace")
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"scale must be a positive number, not {scale!r}")
    if not 0 < output_share <= 1:
        raise ValueError(f"output share must be in (0, 1], not {output_share!r}")
    if not 1.0 <= pue <= 10.0:
        raise ValueError(f"PUE is facility over IT energy, from 1 to 10, not {pue!r}")
    if gco2_per_kwh is not None and not 0 <= gco2_per_kwh <= 5000:
        raise ValueError(f"carbon intensity must be 0 to 5,000 gCO2/kWh, not {gco2_per_kwh!r}")
    f, mult = ob.frame, scale * output_share
    with np.errstate(over="ignore"):  # an absurd scale is refused just below
        demand = f["y"].to_numpy(float) * mult
        provisioned = f["capacity"].to_numpy(float) * mult
    most = float(np.nanmax(provisioned, initial=0.0)) / (replica.tok_s * bin_s)
    if not (math.isfinite(most) and most <= MAX_REPLICAS) or min_replicas > MAX_REPLICAS:
        raise ValueError(f"the plan would need over {MAX_REPLICAS:,} replicas in a bin "
                         f"({most:.3g}): lower the scale or the fewest replicas kept up")
    reps = replicas_needed(provisioned, replica.tok_s, bin_s, min_replicas)
    served_cap = reps * replica.delivered_tok_s * bin_s
    frame = pd.DataFrame({"ts": pd.to_datetime(f["ts"]), "part": f["part"].to_numpy(),
                          "demand": demand, "provisioned": provisioned, "replicas": reps,
                          "served": served_cap, "shortfall": demand > served_cap})
    test = frame[frame["part"] == "test"]
    peak = int(replicas_needed(np.array([peak_demand * mult]), replica.tok_s, bin_s,
                               min_replicas)[0])
    risk_total = ob.violation_target + replica.alpha
    short = test["shortfall"].to_numpy()
    tokens = float(test["demand"].sum())
    served = float(np.minimum(test["demand"], test["served"]).sum())
    backtest = {
        "bins": int(len(test)), "shortfall_bins": int(short.sum()),
        "shortfall_rate": float(short.mean()) if len(test) else None,
        "shortfall_fraction": (tokens - served) / tokens if tokens > 0 else 0.0,
        "demand_violation_rate": ob.test["violation_rate"],
        "within_risk": bool(short.mean() <= risk_total) if len(test) else None}
    risk = {"demand": ob.violation_target, "delta": ob.delta, "capacity": replica.alpha,
            "total": risk_total, "overbooking_factor": ob.factor,
            "rule": "union bound: P(shortfall in a bin) <= demand + capacity; the demand "
                    "term holds with probability 1 - delta (Learn-then-Test), the two are not "
                    "calibrated jointly; the capacity term is one event for every bin (a "
                    "replica below its bound is below it all the time), not a per-bin chance"}
    notes = []
    if replica.alpha == 0.0:
        notes.append(f"capacity risk 0: the {replica.basis} is taken as exact (each concurrency "
                     "was benchmarked once, so its run-to-run spread is not measured)")
    econ = _economics(test, peak, replica, bin_s, served, gco2_per_kwh, pue, notes)
    return FleetPlan(frame, _by_hour(frame), _by_weekday_hour(frame), risk, backtest, econ,
                     notes, replica, int(bin_s), float(scale), int(min_replicas), peak,
                     float(output_share))


def _economics(test: pd.DataFrame, peak: int, r: ReplicaCapacity, bin_s: int, served: float,
               gco2_per_kwh: float | None, pue: float, notes: list[str]) -> dict:
    """GPU-hours, cost, energy and carbon on the test window (the module's docstring)."""
    hours = len(test) * bin_s / 3600
    planned = float(test["replicas"].sum()) * r.gpus * bin_s / 3600
    flat = peak * r.gpus * hours
    out = {"test_hours": hours, "planned_gpu_h": planned, "peak_gpu_h": flat,
           "saved_fraction": (flat - planned) / flat if flat else None,
           "served_tokens": served, "usd": None, "usd_per_day": None,
           "usd_per_1m_tokens": None, "energy_kwh": None, "j_per_token": None,
           "gco2_per_1m_tokens": None, "pue": pue, "gco2_per_kwh": gco2_per_kwh,
           "energy_lower_bound": r.idle_w_per_gpu is None}
    if r.price_usd_per_gpu_h is not None and math.isfinite(r.price_usd_per_gpu_h):
        usd = planned * r.price_usd_per_gpu_h
        out |= {"usd": usd, "usd_per_day": usd / (hours / 24) if hours else None,
                "usd_per_1m_tokens": usd / served * 1e6 if served > 0 else None}
    else:
        notes.append("no $ figures: the catalog states no price for this GPU kind")
    if r.power_w is not None:
        kwh = _energy_j(test, r, bin_s, served, notes) / 3.6e6 * pue
        out |= {"energy_kwh": kwh, "j_per_token": kwh * 3.6e6 / served if served > 0 else None}
        if gco2_per_kwh is not None and served > 0:
            out["gco2_per_1m_tokens"] = kwh * gco2_per_kwh / served * 1e6
        elif gco2_per_kwh is None:
            notes.append("no carbon figure: no carbon intensity (site or gCO2/kWh) was given")
    else:
        notes.append("no energy figures: the knee run measured no energy per token")
    return out


def _energy_j(test: pd.DataFrame, r: ReplicaCapacity, bin_s: int, served: float,
              notes: list[str]) -> float:
    """IT energy of the planned replicas on the test window, J, by the linear power model:
    each replica draws its idle power (GPUs x the catalog's idle W) for every planned bin and
    the knee's extra power (measured J/token x tokens/s - idle) for the seconds it is busy
    (served tokens / the knee's tokens/s). Without an idle figure, the busy seconds alone
    (idle replicas drawing nothing: a lower bound)."""
    busy_s = served / r.delivered_tok_s
    if r.idle_w_per_gpu is None:
        notes.append("energy: busy replica-seconds at the knee's measured power only; the "
                     "catalog states no idle power for this GPU kind, so idle replicas count "
                     "nothing (a lower bound)")
        return busy_s * r.power_w
    idle_w = r.idle_w_per_gpu * r.gpus
    notes.append(f"energy: linear power model, {idle_w:g} W idle per replica (catalog) for "
                 f"every planned bin + {max(r.power_w - idle_w, 0):.0f} W more while busy "
                 "(the knee's measured J/token x tokens/s)")
    return float(test["replicas"].sum()) * bin_s * idle_w + busy_s * max(r.power_w - idle_w, 0.0)


def _by_hour(frame: pd.DataFrame) -> pd.DataFrame:
    """Most replicas planned in each UTC hour of day over the planned bins (calibration and
    test: both are provisioned from out-of-sample bands); hours without a bin: NaN."""
    g = frame.groupby(frame["ts"].dt.hour)["replicas"].agg(["max", "count"])
    return pd.DataFrame({"hour_utc": range(24)}).assign(
        replicas=lambda d: d["hour_utc"].map(g["max"]),
        bins=lambda d: d["hour_utc"].map(g["count"]).fillna(0).astype(int))


def _by_weekday_hour(frame: pd.DataFrame) -> pd.DataFrame:
    """The same per weekday x UTC hour (NaN where the planned bins have no such hour)."""
    g = frame.groupby([frame["ts"].dt.day_of_week, frame["ts"].dt.hour])["replicas"].max()
    idx = pd.MultiIndex.from_product([range(7), range(24)], names=["wd", "hour_utc"])
    out = g.reindex(idx).reset_index(name="replicas")
    return out.assign(weekday=out["wd"].map(dict(enumerate(WEEKDAYS))))[
        ["weekday", "hour_utc", "replicas"]]


def hourly_minimum(p: FleetPlan) -> list[int]:
    """The planned replicas per UTC hour of day (24 ints): an hour without a planned bin takes
    the plan's highest hour (the safe side). What the KEDA cron triggers carry."""
    top = int(np.nanmax(p.by_hour["replicas"])) if p.by_hour["replicas"].notna().any() else \
        p.min_replicas
    return [int(v) if pd.notna(v) else top for v in p.by_hour["replicas"]]


def needed_max(p: FleetPlan) -> int:
    """The most replicas the realised demand of any planned bin needed (calibration and test:
    the bursts a reactive scaler has to reach)."""
    if not len(p.frame):
        return 0
    return int(replicas_needed(np.array([p.frame["demand"].max()]), p.replica.tok_s,
                               p.bin_s, 0)[0])


def to_json(p: FleetPlan) -> dict:
    """Strict-JSON summary: replicas (min / mean / max over the test window, the flat peak,
    per UTC hour), the most replicas per weekday x UTC hour (null: no planned bin then), risk,
    backtest, $ per 1M output tokens, economics, notes."""
    test = p.frame[p.frame["part"] == "test"]

    def clean(v):
        if v is None:
            return None
        v = v.item() if hasattr(v, "item") else v
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return {
        "unit": "output tokens per bin", "bin_s": p.bin_s, "scale": p.scale,
        "output_share": p.output_share,
        "replica": {"tok_s": p.replica.tok_s, "measured_tok_s": p.replica.measured_tok_s,
                    "gpus": int(p.replica.gpus), "basis": p.replica.basis,
                    "power_w": clean(p.replica.power_w),
                    "energy_per_token_j": clean(p.replica.energy_per_token_j),
                    "price_usd_per_gpu_h": clean(p.replica.price_usd_per_gpu_h)},
        "replicas": {"min": int(test["replicas"].min()) if len(test) else None,
                     "mean": float(test["replicas"].mean()) if len(test) else None,
                     "max": int(test["replicas"].max()) if len(test) else None,
                     "peak": p.peak_replicas, "min_replicas": p.min_replicas,
                     "needed_max": needed_max(p),
                     "by_hour_utc": hourly_minimum(p)},
        "by_weekday_hour_utc": {d: [None if pd.isna(v) else int(v) for v in g["replicas"]]
                                for d, g in p.by_weekday_hour.groupby("weekday", sort=False)},
        "risk": {k: clean(v) for k, v in p.risk.items()},
        "backtest": {k: clean(v) for k, v in p.backtest.items()},
        "usd_per_1m_tokens": clean(p.economics["usd_per_1m_tokens"]),
        "economics": {k: clean(v) for k, v in p.economics.items() if k != "usd_per_1m_tokens"},
        "notes": list(p.notes),
    }
