"""Fitted inputs of the hybrid power simulator: :class:`PowerInputs` (the arrival model, the
inference demand shape and the batch power distribution, fitted once and reused across a
sweep), :func:`prepare_inputs` which fits them from frames, :func:`describe_inputs` (the
provenance block of a result) and :func:`clock_offset_for`. Reading the frames from the store
is :mod:`analytics.services.power`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analytics.config import DEFAULT_T0
from analytics.power.arrivals import ArrivalModel, fit_arrival_model
from analytics.power.inference import demand_shape, synthetic_demand
from analytics.power.measured import (
    ACME_KALOS_POWER_W,
    ACME_PCT,
    HW_FACTOR_A100_TO_H100,
    SPEEDS,
    TEMPLATES,
)
from analytics.power.requests import RequestModel


@dataclass(frozen=True)
class PowerInputs:
    """Everything measured a scenario needs (fitted once, reused across a sweep).

    Attributes
    ----------
    arrivals : fitted batch arrival model
    demand_tokens_per_min : ndarray of shape (n,): the inference demand shape from its first
        whole day (see :func:`demand_shape`)
    demand_start : instant of the demand shape's first minute (the scenario's measured window
        starts there)
    demand_span_min : minutes of distinct inference trace in the shape
    jobs_label, inference_label : where the inputs came from (dataset names)
    synthetic : the inference demand is the synthetic envelope, not a trace
    power_pct, power_w : batch per-GPU power distribution (AcmeTrace CDF percentiles and W)
    power_source : which AcmeTrace table was used
    notes : caveats to show with the results
    left_out : GPU jobs of the trace the arrival model did not use, each ``{"job_id", "reason",
        "runtime_s"}`` (:func:`left_out_jobs`)
    left_out_total : how many GPU jobs were left out (``left_out`` lists at most
        :data:`LEFT_OUT_LISTED`)
    request_model : the request-group arrival model (:mod:`analytics.power.requests`); when
        set, scenarios draw inference from it instead of replaying ``demand_tokens_per_min``
    density : :func:`demand_density` of the inference demand shape (its warning says when the
        trace is too sparse to represent serving load)
    largest_jobs : the trace's largest GPU jobs as ``(job_id, gpu_milli)``, largest first (at
        most :data:`LEFT_OUT_LISTED`): those larger than a scenario's pool are named in its
        result (:func:`capped_jobs`), as their simulated copies run on the whole pool
    """

    arrivals: ArrivalModel
    demand_tokens_per_min: np.ndarray
    demand_start: pd.Timestamp
    demand_span_min: int
    jobs_label: str
    inference_label: str
    synthetic: bool
    power_pct: tuple[float, ...] = ACME_PCT
    power_w: tuple[float, ...] = ACME_KALOS_POWER_W
    power_source: str = "AcmeTrace Kalos per-GPU power CDF (baked percentiles 0,5,..,100)"
    notes: tuple[str, ...] = field(default_factory=tuple)
    left_out: tuple[dict, ...] = field(default_factory=tuple)
    left_out_total: int = 0
    request_model: RequestModel | None = None
    density: dict = field(default_factory=dict)
    largest_jobs: tuple[tuple[str, int], ...] = field(default_factory=tuple)


#: Most left-out jobs a result lists one by one (the total is always given).
LEFT_OUT_LISTED = 100


def capped_jobs(inputs: PowerInputs, n_gpus: int) -> tuple[list[dict], int]:
    """The trace's GPU jobs that ask for more GPUs than a pool of ``n_gpus``: their copies in
    the simulation are shrunk to the pool (:func:`~analytics.power.jobs.generate_jobs`, a job
    larger than the pool could never start). Returns ``(jobs, total)``: each listed job
    ``{"job_id", "gpus" (asked), "capped_to_gpus"}``, largest first (at most
    :data:`LEFT_OUT_LISTED`), and how many of the fitted jobs are larger than the pool (from
    the arrival model's groups, so the total counts every one)."""
    limit = n_gpus * 1000
    total = int(sum(int((g.gpu_milli > limit).sum()) for g in inputs.arrivals.groups))
    listed = [{"job_id": str(j), "gpus": m / 1000.0, "capped_to_gpus": n_gpus}
              for j, m in inputs.largest_jobs if m > limit]
    return listed, total


def left_out_jobs(frame: pd.DataFrame, source_tz: str | None) -> tuple[tuple[dict, ...], str | None]:
    """Why each GPU job of :func:`analytics.store.gpu_jobs_left_out` is not simulated.

    Parameters
    ----------
    frame : ``job_id``, ``runtime_s`` (s, NaN without a time) and ``why`` per left-out job
    source_tz : the zone the trace's local times were converted from (None: read as UTC)

    Returns
    -------
    (jobs, note): up to :data:`LEFT_OUT_LISTED` ``{"job_id", "reason", "runtime_s"}`` dicts (the
    run time None when a time is missing) and one line counting them by reason (None when no job
    was left out).
    """
    if frame.empty:
        return (), None
    dst = ("" if source_tz else "; local times read as UTC across a DST change? re-ingest with "
           "--tz (the Data page's time zone)")
    reasons = {"no_start": "never started (no Start time)",
               "no_end": "no End time (still running or never ended)",
               "end_before_start": "End before Start (negative run time)" + dst,
               "zero_runtime": "zero run time (End = Start)"}
    jobs = tuple({"job_id": str(r.job_id), "reason": reasons[r.why],
                  "runtime_s": None if pd.isna(r.runtime_s) else float(r.runtime_s)}
                 for r in frame.head(LEFT_OUT_LISTED).itertuples())
    counts = frame["why"].value_counts()
    note = (f"{len(frame)} GPU job(s) left out of the arrival model: " + "; ".join(
        f"{n} {reasons[w]}" for w, n in counts.items())
        + (f" (first {LEFT_OUT_LISTED} listed)" if len(frame) > LEFT_OUT_LISTED else ""))
    return jobs, note


#: Share of empty minutes at or above which an inference trace is too sparse to represent
#: serving load. Rule: when half or more of the minutes carry no demand, the median minute is
#: empty, so the inference series is mostly off and switches on and off (per-minute power of 0
#: or a burst) rather than following a serving load, and every median of the inference part
#: (its 1-minute ramp included) is 0. Measured on the staged traces (1-minute grid, share of
#: minutes with no request): Alibaba LoRA 0.704 (33,157 min), BurstGPT week-1 0.383 (10,080),
#: Azure code 2023 0.224 (58), Azure conv 2023 0.0 (60), Mooncake conversation 0.0 (59); the
#: threshold separates the LoRA trace, the one with a 0 % median ramp, from every token trace.
SPARSE_EMPTY_SHARE = 0.5


def too_sparse(empty_share: float) -> bool:
    """Whether a trace with this share of empty minutes is too sparse for the power simulator
    (:data:`SPARSE_EMPTY_SHARE`).

    >>> too_sparse(0.704), too_sparse(0.383), too_sparse(0.5)
    (True, False, True)
    """
    return bool(empty_share >= SPARSE_EMPTY_SHARE)


def demand_density(tokens_per_min: np.ndarray, label: str) -> dict:
    """How much of an inference demand shape is empty, and the warning when it is too sparse.

    Parameters
    ----------
    tokens_per_min : ndarray of shape (n,), demand per minute (tokens or GPU-seconds), >= 0
    label : the dataset's name, for the warning

    Returns
    -------
    JSON-ready dict: ``minutes`` (n), ``empty_minute_share`` (share of minutes with no demand,
    0-1), ``median_per_min`` (median demand per minute, the trace's unit), ``too_sparse``
    (:func:`too_sparse`), ``threshold`` (:data:`SPARSE_EMPTY_SHARE`) and ``warning`` (a sentence
    when too sparse, else None).

    >>> demand_density(np.array([0, 0, 0, 5.0]), "x")["empty_minute_share"]
    0.75
    """
    values = np.asarray(tokens_per_min, float)
    n = int(values.size)
    share = float((values <= 0).mean()) if n else 1.0
    sparse = too_sparse(share)
    warning = None
    if sparse:
        warning = (f"{label} is too sparse to represent serving load: {share:.0%} of its "
                   f"{n:,} minutes carry no inference demand (the rule: {SPARSE_EMPTY_SHARE:.0%} "
                   "or more), so the median minute is empty and inference power switches on "
                   "and off instead of following a serving load; shortfall and median ramps "
                   "then describe the trace's gaps. Choose a dense request trace (BurstGPT "
                   "per-minute tokens, Azure LLM, Mooncake) for the paper's question.")
    return {"minutes": n, "empty_minute_share": round(share, 4),
            "median_per_min": float(np.median(values)) if n else 0.0,
            "too_sparse": sparse, "threshold": SPARSE_EMPTY_SHARE, "warning": warning}


def clock_offset_for(fmt: str | None) -> float:
    """Hours from UTC to the site clock of a job-trace format: MIT SuperCloud (Boston, EST in
    January-March 2021) -5; others 0 (sacct times ingested without ``--tz`` are the local clock
    read as UTC; openb times are relative). A dataset with a ``source_tz`` takes the zone's
    offset instead (:func:`analytics.services.power.load_inputs`).

    >>> clock_offset_for("mit_supercloud_slurm"), clock_offset_for(None)
    (-5.0, 0.0)
    """
    return -5.0 if fmt == "mit_supercloud_slurm" else 0.0


def prepare_inputs(jobs: pd.DataFrame, demand_grid: pd.DataFrame | None, rng: np.random.Generator,
                   jobs_label: str, inference_label: str | None = None, clock_offset_h: float = 0.0,
                   power_cdf: pd.DataFrame | None = None, min_days: int = 7) -> PowerInputs:
    """Fit the arrival model and lay out the inference demand for scenarios.

    Parameters
    ----------
    jobs : :func:`analytics.store.gpu_jobs` frame
    demand_grid : 1-minute :func:`analytics.services.demand.demand_grid` of an inference trace, or ``None``
        for the SYNTHETIC envelope (:func:`synthetic_demand`), flagged ``synthetic``
    rng : generator (arrival-model calibration, synthetic envelope)
    jobs_label, inference_label : dataset names for the output
    clock_offset_h : see :func:`fit_arrival_model`
    power_cdf : ``reference_cdf`` rows; when AcmeTrace's Kalos CDF is among them its full
        1,000-point CDF replaces the baked percentiles
    min_days : days of SYNTHETIC envelope to lay out

    Raises
    ------
    ValueError
        Too few GPU jobs, or an all-zero demand series.
    """
    notes = []
    model = fit_arrival_model(jobs, rng, clock_offset_h)
    if demand_grid is None:
        n = min_days * 1440
        shape = synthetic_demand(rng, n)
        start = pd.Timestamp(DEFAULT_T0).tz_localize(None)
        span = n
        inference_label = "SYNTHETIC envelope"
        notes.append("no inference trace in the store: the inference demand is a SYNTHETIC daily "
                     "envelope, not measured traffic")
    else:
        shape, start, more = demand_shape(demand_grid)
        span = int(shape.size)
        notes += more
        if shape.sum() <= 0:
            raise ValueError(f"{inference_label}: the inference demand is all zeros")
    pct, pw, src = ACME_PCT, ACME_KALOS_POWER_W, PowerInputs.power_source
    if power_cdf is not None and not power_cdf.empty:
        rows = power_cdf[(power_cdf["cluster"] == "Kalos")
                         & (power_cdf["metric"] == "gpu_power_watts")].sort_values("cdf_percent")
        if not rows.empty:
            pct = tuple(rows["cdf_percent"].astype(float))
            pw = tuple(rows["value"].astype(float))
            src = "AcmeTrace Kalos per-GPU power CDF from the store (reference_cdf)"
    if model.days < 3:
        notes.append(f"the job trace spans only {model.days} day(s): daily profiles are rough")
    density = demand_density(shape, inference_label or "")
    return PowerInputs(model, np.asarray(shape, float), pd.Timestamp(start), int(span),
                       jobs_label, inference_label or "", demand_grid is None, pct, pw, src,
                       tuple(notes), density=density)


def describe_inputs(inputs: PowerInputs, scenario) -> dict:
    """The provenance block of a result: datasets, groups, templates, power sources, notes.

    Parameters
    ----------
    inputs : the fitted inputs
    scenario : the :class:`~analytics.power.experiments.Scenario` (its ``speed`` picks the LLM
        templates; not imported here, experiments imports this module)

    Returns
    -------
    JSON-ready dict: ``jobs``, ``inference`` (dataset names), ``synthetic``, ``groups``
    (:meth:`ArrivalModel.summary`), ``fit_window``, ``clock_offset_h`` (h), ``templates`` (ML.ENERGY
    v3 rows), ``templates_source``, ``batch_power``, ``hw_factor`` and its source, ``notes``,
    ``jobs_used`` (GPU jobs the arrival model was fitted on), ``left_out_jobs`` (each GPU job not
    used and why; at most :data:`LEFT_OUT_LISTED`), ``left_out_jobs_total``, ``capped_jobs`` /
    ``capped_jobs_total`` (jobs asking for more GPUs than the pool: :func:`capped_jobs`),
    ``demand_density`` (:func:`demand_density`: empty-minute share and the sparsity warning),
    ``inference_model`` (``"replay"`` or ``"groups"``) and, for ``"groups"``,
    ``request_model``: ``{"groups": RequestModel.summary(), "validation":
    RequestModel.validation, "notes"}``.
    """
    rm = inputs.request_model
    return {
        "jobs": inputs.jobs_label,
        "inference": inputs.inference_label,
        "synthetic": inputs.synthetic,
        "groups": inputs.arrivals.summary(),
        "fit_window": list(inputs.arrivals.window),
        "clock_offset_h": inputs.arrivals.clock_offset_h,
        "templates": [{"model": t.model, "gpus": t.gpus, "max_num_seqs": t.max_num_seqs,
                       "throughput_tok_s": t.throughput_tok_s, "power_w": t.power_w,
                       "energy_per_token_j": t.energy_per_token_j}
                      for t in TEMPLATES[scenario.speed]],
        "templates_source": "ML.ENERGY v3 all_task_configurations_flat.csv: lm-arena-chat, H100, "
                            "bfloat16, fewest GPUs at max_num_seqs "
                            f"{SPEEDS[scenario.speed]}",
        "batch_power": inputs.power_source,
        "hw_factor": HW_FACTOR_A100_TO_H100,
        "hw_factor_source": "H100 SXM 700 W / A100 SXM4 400 W board power (hardware CATALOG)",
        "notes": list(inputs.notes),
        "jobs_used": inputs.arrivals.jobs,
        "left_out_jobs": [dict(j) for j in inputs.left_out],
        "left_out_jobs_total": inputs.left_out_total,
        **_capped(inputs, scenario.n_gpus),
        "inference_model": "replay" if rm is None else "groups",
        **({} if rm is None else {"request_model": {"groups": rm.summary(),
                                                    "validation": dict(rm.validation),
                                                    "notes": list(rm.notes)}}),
        "demand_density": dict(inputs.density),
    }


def _capped(inputs: PowerInputs, n_gpus: int) -> dict:
    listed, total = capped_jobs(inputs, n_gpus)
    return {"capped_jobs": listed, "capped_jobs_total": total}


NO_JOBS_HINT = ("no job trace in the store: add one on the Data page or with `headroom ingest "
                "FILE` - an MIT SuperCloud Slurm export (slurm-log-queueing-clean.csv), Slurm "
                "`sacct --parsable2` output, or an Alibaba openb pod list "
                "(openb_pod_list_default.csv)")


def candidate_datasets(ledger: pd.DataFrame, without_tokens: frozenset[str] = frozenset(),
                       sparse: frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    """Possible inputs in a dataset ledger (:func:`analytics.store.list_datasets`).

    Returns
    -------
    (jobs, demand): ``jobs`` datasets by rows, most first; demand datasets (requests or series)
    at 1-minute resolution or finer, dense ones first (``sparse``: the names that
    :func:`too_sparse` judges too sparse go last), then within each, token traces before traces
    in ``without_tokens`` (GPU-seconds only, such as the Alibaba LoRA trace), then longest time
    span first. The first demand name is the default inference input.
    """
    jobs = ledger[ledger["kind"] == "jobs"].sort_values("rows", ascending=False)
    demand = ledger[ledger["kind"].isin(["requests", "demand_series"])
                    & (ledger["resolution_s"].fillna(0) <= 60)].copy()
    demand["span"] = demand["ts_max"] - demand["ts_min"]
    demand["no_tokens"] = demand["name"].isin(without_tokens)
    demand["sparse"] = demand["name"].isin(sparse)
    demand = demand.sort_values(["sparse", "no_tokens", "span", "dataset_id"],
                                ascending=[True, True, False, True])
    return jobs["name"].tolist(), demand["name"].tolist()
