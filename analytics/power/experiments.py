"""The experiments of the hybrid power paper (Methods, "Batch-inference co-simulation"): a
:class:`Scenario` (one cell: inference share, utilisation, pool, scheduler, ...), its run
(:func:`run_scenario`), the share sweep at fixed utilisation (:func:`sweep`), whether a sweep
shows the paper's shapes (:func:`shape_report`) and the daily power profile
(:func:`daily_profile`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from analytics.params import check, knob
from analytics.power.engine import SimParams, SimResult, simulate
from analytics.power.inference import inference_load
from analytics.power.inputs import PowerInputs
from analytics.power.jobs import generate_jobs
from analytics.power.measured import TEMPLATES
from analytics.power.metrics import power_metrics
from analytics.power.requests import generate_requests
from analytics.power.scheduler import SCHEDULERS

#: What a scenario's utilisation holds fixed for inference (:attr:`Scenario.hold`).
HOLDS = ("served", "offered")


@dataclass(frozen=True)
class Scenario:
    """One experiment cell (hybrid power paper, Methods, "Batch-inference co-simulation").

    Attributes
    ----------
    inference_share : share of the total offered GPU-time that is inference, in [0, 1]
    utilization : target utilisation: offered (batch + inference) GPU-time / pool GPU-time
    n_gpus : GPUs in the pool
    days : measured window, days
    warmup_days : simulated before the window and discarded (queues fill; long jobs start)
    scheduler : ``"fcfs"`` (with backfilling) or ``"swf"``
    checkpoint_min : segment length l, minutes (``None``: no checkpointing)
    capped : inference may hold at most ``cap_factor`` x its mean allocation
    cap_factor : see ``capped``
    speed : serving speed setting of the LLM templates, ``"F"``, ``"M"``, ``"S"``
    hold : what ``utilization x inference_share`` fixes for inference: ``"served"`` (default;
        the GPUs inference is actually given after the pool / cap clip, so clipping cannot
        drain the realised utilisation, issue 18 item 13) or ``"offered"`` (its demand before
        the clip, the paper's utilisation proxy and the behaviour before)

    Raises
    ------
    ValueError
        A field out of its bounds (:func:`analytics.params.check`), naming the field, its range
        and its help.
    """

    inference_share: float = knob(0.5, "share of the total offered GPU-time that is inference",
                                  lo=0.0, hi=1.0)
    utilization: float = knob(0.8, "target utilisation: offered (batch + inference) GPU-time / "
                              "pool GPU-time", lo=0.0, hi=1.0, lo_open=True)
    n_gpus: int = knob(256, "GPUs in the pool", lo=1, flag="--gpus", aliases=("--n-gpus",))
    days: float = knob(7.0, "measured window", "days", lo=0.0, lo_open=True)
    warmup_days: float = knob(2.0, "simulated before the window and discarded", "days", lo=0.0)
    scheduler: str = knob("fcfs", "batch queue order: fcfs (with backfilling) or swf (smallest "
                          "work first)", choices=SCHEDULERS)
    checkpoint_min: float | None = knob(60.0, "checkpoint segment length l (None: no "
                                        "checkpointing)", "min", lo=0.0, lo_open=True)
    capped: bool = knob(False, "cap inference at cap_factor x its mean GPU allocation")
    cap_factor: float = knob(1.25, "inference cap as a multiple of its mean GPU allocation "
                             "(with capped)", lo=1.0)
    speed: str = knob("M", "LLM serving speed: F/M/S = vLLM max_num_seqs 32/64/128 (ML.ENERGY)",
                      choices=tuple(TEMPLATES))
    hold: str = knob("served", "what utilisation x share fixes for inference: served (GPUs it "
                     "is given after the pool/cap clip) or offered (its demand before the clip)",
                     choices=HOLDS)

    def __post_init__(self):
        check(self)


@dataclass(frozen=True)
class ScenarioResult:
    """A scenario's measured window.

    Attributes
    ----------
    frame : per-minute ``ts`` plus the columns of :attr:`SimResult.minutes` for the window
    metrics : :func:`power_metrics` of total power plus ``realized_utilization``,
        ``realized_inference_share``, ``inference_clipped_gpu_min``,
        ``inference_target_reached`` (False: the served inference target was above what the
        trace can fill, :func:`inference_load`), ``batch_shortfall`` (1 - served batch GPUs /
        offered batch GPUs: the batch queue grew instead of filling the pool),
        ``inference_shortfall`` (share of inference GPU-minutes demanded but not served),
        ``batch_jobs`` (arrived in the window), ``mean_wait_h`` (submit to first start, jobs
        started in the window), ``mean_power_w``, ``events``, ``cv_batch``, ``cv_inference``
    scenario : the inputs
    """

    frame: pd.DataFrame
    metrics: dict
    scenario: Scenario


def run_scenario(inputs: PowerInputs, scenario: Scenario, rng: np.random.Generator
                 ) -> ScenarioResult:
    """Simulate one scenario and measure its window.

    Offered load is ``utilization x n_gpus`` GPUs on average: inference gets
    ``inference_share`` of it (:func:`inference_load`; with ``hold="served"`` the mean GPUs it is
    *served* after the pool / cap clip, found by bisection on that clipped mean, a cheap
    quantity that needs no simulation), batch the rest, by scaling the fitted arrival rate by
    ``(1 - share) x U x C / offered_gpus(trace)``. Inference demand is the replayed trace, or a
    draw of the request-group model when ``inputs.request_model`` is set
    (:mod:`analytics.power.requests`). Runtimes are capped at the
    simulated length (a job longer than the run cannot contribute more), and the run starts
    from the equilibrium prefill of :func:`generate_jobs` followed by ``warmup_days``.

    Parameters
    ----------
    inputs : :class:`PowerInputs`
    scenario : :class:`Scenario`
    rng : generator for arrivals and per-job power draws

    Returns
    -------
    ScenarioResult
    """
    warm_min = int(round(scenario.warmup_days * 1440))
    n_min = warm_min + int(round(scenario.days * 1440))
    horizon_s = n_min * 60.0
    offered = scenario.utilization * scenario.n_gpus
    load = inference_load(_inference_demand(inputs, scenario, rng, n_min, warm_min),
                          offered * scenario.inference_share, TEMPLATES[scenario.speed],
                          **({"served_pool_gpus": scenario.n_gpus,
                              "cap_factor": scenario.cap_factor if scenario.capped else None}
                             if scenario.hold == "served" else {}))
    batch_gpus = offered * (1.0 - scenario.inference_share)
    natural = inputs.arrivals.offered_gpus(horizon_s)
    scale = batch_gpus / natural if natural > 0 else 0.0
    sim_days = int(math.ceil(n_min / 1440))
    jobs = generate_jobs(inputs.arrivals, rng, sim_days, scale, horizon_s, scenario.n_gpus * 1000,
                         inputs.power_pct, inputs.power_w, prefill=True)
    cap = None
    if scenario.capped and scenario.inference_share > 0:
        cap = int(math.ceil(scenario.cap_factor * float(load.demand_gpus.mean())))
    params = SimParams(scenario.n_gpus, scenario.scheduler, True, scenario.checkpoint_min, cap)
    res = simulate(jobs, params, horizon_s, load if scenario.inference_share > 0 else None)
    window = res.minutes.iloc[warm_min:].reset_index(drop=True)
    window.insert(0, "ts", inputs.demand_start
                  + pd.to_timedelta(window["minute"] - warm_min, unit="min"))
    metrics = window_metrics(window, res, warm_min * 60.0, scenario.n_gpus)
    metrics["inference_target_reached"] = bool(load.target_reached)
    served_batch = float(window["batch_gpus"].mean()) if len(window) else 0.0
    metrics["batch_shortfall"] = (max(0.0, 1.0 - served_batch / batch_gpus) if batch_gpus > 0
                                  else 0.0)
    return ScenarioResult(window, metrics, scenario)


def _inference_demand(inputs: PowerInputs, scenario: Scenario, rng: np.random.Generator,
                      n_min: int, warm_min: int) -> np.ndarray:
    """Tokens per minute for the run: the replayed shape indexed modulo its length (the window
    starts at its first minute), or, when the inputs carry a request-group model, a fresh draw
    per template (:func:`~analytics.power.requests.generate_requests`) from a child generator
    spawned from ``rng`` (so the batch draws are those of the replay run with the same seed)."""
    if inputs.request_model is None:
        idx = (np.arange(n_min) - warm_min) % inputs.demand_tokens_per_min.size
        return inputs.demand_tokens_per_min[idx]
    start = inputs.demand_start - pd.Timedelta(minutes=warm_min)
    child = rng.spawn(1)[0]
    return generate_requests(inputs.request_model, child, n_min, len(TEMPLATES[scenario.speed]),
                             start.hour * 60 + start.minute)[1]


def window_metrics(window: pd.DataFrame, res: SimResult, window_start_s: float, gpus: int
                   ) -> dict:
    """The metrics of a scenario's measured window (see :attr:`ScenarioResult.metrics`).

    Parameters
    ----------
    window : the measured minutes of :attr:`SimResult.minutes` (n_min rows)
    res : the whole run (its ``jobs`` give arrivals and waits)
    window_start_s : simulated time at which the window starts (after the warm-up), s
    gpus : pool size

    Returns
    -------
    dict: :func:`power_metrics` of total power (``cv``, ``ramp_p50``) plus
    ``realized_utilization`` (mean busy GPUs / pool), ``realized_inference_share`` (served
    inference GPU-minutes / all busy GPU-minutes; NaN when nothing ran),
    ``inference_clipped_gpu_min`` (inference GPU-minutes demanded but not served, by the pool
    or the cap), ``inference_shortfall`` (that as a share of the demand), ``batch_jobs``,
    ``mean_wait_h`` (h; NaN when no job started in the window), ``mean_power_w`` (W),
    ``cv_batch``, ``cv_inference``,
    ``events``.
    """
    metrics = power_metrics(window["total_power_w"].to_numpy())
    demand = window["inference_demand_gpus"].sum()
    jobs = res.jobs
    in_window = (jobs["submit_s"] >= window_start_s)
    started = jobs["first_start_s"] >= window_start_s
    wait = (jobs["first_start_s"] - jobs["submit_s"])[started]
    served = float(window["inference_gpus"].sum())
    busy = float((window["batch_gpus"] + window["inference_gpus"]).sum())
    metrics.update({
        "realized_utilization": busy / len(window) / gpus if len(window) else math.nan,
        "realized_inference_share": served / busy if busy > 0 else math.nan,
        "inference_clipped_gpu_min": max(0.0, float(demand) - served),
        "inference_shortfall": max(0.0, float(1 - window["inference_gpus"].sum() / demand))
        if demand > 0 else 0.0,
        "batch_jobs": int(in_window.sum()),
        "mean_wait_h": float(wait.mean() / 3600) if len(wait) else math.nan,
        "mean_power_w": float(window["total_power_w"].mean()),
        "cv_batch": power_metrics(window["batch_power_w"].to_numpy())["cv"],
        "cv_inference": power_metrics(window["inference_power_w"].to_numpy())["cv"],
        "events": int(res.n_events),
    })
    return metrics


DEFAULT_SHARES = tuple(round(x / 10, 1) for x in range(11))
DEFAULT_UTILIZATIONS = (0.5, 0.8)


def sweep(inputs: PowerInputs, base: Scenario, rng: np.random.Generator,
          shares: tuple[float, ...] = DEFAULT_SHARES,
          utilizations: tuple[float, ...] = DEFAULT_UTILIZATIONS, replications: int = 3,
          progress=None) -> pd.DataFrame:
    """Hold GPU count and target utilisation fixed and vary the inference share.

    Each cell is run ``replications`` times and its metrics averaged. The replications' seeds
    are drawn once from ``rng`` and reused in every cell (common random numbers: the same
    uniforms drive arrivals and power draws at every share, so differences between cells come
    from the composition, not from a different random week).

    Parameters
    ----------
    inputs, base : fitted inputs and the scenario whose other settings are kept
    rng : generator the replication seeds are drawn from
    shares : inference shares, in [0, 1]
    utilizations : target utilisations
    replications : runs per cell
    progress : optional ``callable(done, total)``

    Returns
    -------
    DataFrame with one row per (utilization, inference_share): ``cv``, ``ramp_1min``,
    ``ramp_5min``, ``ramp_15min`` and the other :attr:`ScenarioResult.metrics` (means over the
    replications), plus ``replications``.
    """
    if replications < 1:
        raise ValueError("replications must be >= 1")
    seeds = [int(x) for x in rng.integers(2**62, size=replications)]
    rows = []
    total = len(shares) * len(utilizations) * replications
    done = 0
    for utilization in utilizations:
        for share in shares:
            for seed in seeds:
                if progress:
                    progress(done, total)
                res = run_scenario(inputs, replace(base, inference_share=float(share),
                                                   utilization=float(utilization)),
                                   np.random.default_rng(seed))
                metrics = dict(res.metrics)
                ramps = metrics.pop("ramp_p50")
                rows.append({"utilization": float(utilization), "inference_share": float(share),
                             **{f"ramp_{k}": v for k, v in ramps.items()}, **metrics})
                done += 1
    table = pd.DataFrame(rows).groupby(["utilization", "inference_share"], as_index=False,
                                       sort=False).mean()
    table["replications"] = replications
    return table


def shape_report(table: pd.DataFrame) -> dict:
    """Whether a sweep shows the paper's shapes, per utilisation.

    ``u_shape_cv``: some interior share has a CV below both ends (batch-only and
    inference-only). ``hump_15min``: some interior share has a 15-minute ramp above both ends.
    Also the share at the CV minimum and at the 15-minute ramp maximum.

    Returns
    -------
    dict keyed by utilisation (as a string) -> {"u_shape_cv", "cv_min_share", "hump_15min",
    "ramp15_max_share"}
    """
    out = {}
    for u, g in table.groupby("utilization"):
        g = g.sort_values("inference_share")
        cv = g["cv"].to_numpy()
        r15 = g["ramp_15min"].to_numpy()
        shares = g["inference_share"].to_numpy()
        inner = slice(1, len(g) - 1)
        out[f"{u:g}"] = {
            "u_shape_cv": bool(len(g) > 2 and np.nanmin(cv[inner]) < min(cv[0], cv[-1])),
            "cv_min_share": float(shares[int(np.nanargmin(cv))]),
            "hump_15min": bool(len(g) > 2 and np.nanmax(r15[inner]) > max(r15[0], r15[-1])),
            "ramp15_max_share": float(shares[int(np.nanargmax(r15))]),
        }
    return out


def daily_profile(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean power by hour of day, each component divided by its own mean (1 = the component's
    average), from a scenario frame.

    Returns
    -------
    DataFrame of shape (24, 4): ``hour``, ``total``, ``batch``, ``inference`` (NaN for a
    component that is always 0).
    """
    hours = pd.to_datetime(frame["ts"]).dt.hour
    out = {"hour": np.arange(24)}
    for col, name in (("total_power_w", "total"), ("batch_power_w", "batch"),
                      ("inference_power_w", "inference")):
        mean = frame[col].mean()
        by = frame[col].groupby(hours).mean().reindex(range(24))
        out[name] = (by / mean).to_numpy() if mean > 0 else np.full(24, np.nan)
    return pd.DataFrame(out)
