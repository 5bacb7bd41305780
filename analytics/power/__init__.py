"""Hybrid batch + inference power profiles: a discrete-event co-simulation of one GPU pool.

Method source: Mural, Yu & Xie, "Workload composition smooths aggregate power demand while
sustaining short-horizon ramps in AI data centers" (the *hybrid power paper*; section numbers
below are its own). Batch jobs and LLM inference share a fixed pool of GPUs; inference has
priority access, batch jobs run on the residual capacity through a queue (FCFS with backfilling
behind a head-job reservation, or smallest-work-first), checkpointed into segments of length
``checkpoint_min``. Outcomes are the coefficient of variation of total power and the median
absolute change of mean-normalised total power over 1-, 5- and 15-minute horizons (Methods,
"Outcome metrics and normalization").

Modules, in data-flow order:

* :mod:`~analytics.power.measured` - baked measurements: LLM templates (ML.ENERGY v3),
  AcmeTrace per-GPU power quantiles, the A100 -> H100 hardware factor.
* :mod:`~analytics.power.arrivals` - the paper's batch arrival generator (Methods, "Batch job
  arrivals"): Ward resource groups, negative-binomial daily counts, calibrated logistic-normal
  hourly profiles (:func:`fit_arrival_model`).
* :mod:`~analytics.power.jobs` - :class:`JobArrays` and :func:`generate_jobs` (a scenario of any
  length drawn from the fitted model).
* :mod:`~analytics.power.inference` - per-minute inference demand split over the templates and
  scaled to the scenario's inference share (:func:`inference_load`).
* :mod:`~analytics.power.requests` - the paper's request-group arrival model (Methods, "Inference
  request arrivals"): code / conversation Q1-Q4 groups, negative-binomial minute counts split
  over the templates with the overdispersion rescaled (:func:`fit_request_model`,
  :func:`generate_requests`), and its replay validation (:func:`validate`: revealed capacity,
  Welch PSD).
* :mod:`~analytics.power.inputs` - :class:`PowerInputs` (fitted once per sweep),
  :func:`prepare_inputs`, :func:`describe_inputs`, the sparsity rule of inference traces
  (:func:`demand_density`, :func:`too_sparse`).
* :mod:`~analytics.power.entities`, :mod:`~analytics.power.runspec`,
  :mod:`~analytics.power.scheduler`, :mod:`~analytics.power.engine` - the discrete-event engine
  (:class:`PowerPoolEngine`, :func:`simulate`): immutable records, the run's settings and result
  (:class:`SimParams`, :class:`SimResult`), registered scheduling policies, the event loop.
* :mod:`~analytics.power.metrics` - per-minute averages, CV and ramps (:func:`power_metrics`).
* :mod:`~analytics.power.experiments` - :class:`Scenario`, :func:`run_scenario`, :func:`sweep`,
  :func:`shape_report`, :func:`daily_profile`.
* :mod:`~analytics.power.sweep_points` - the sweep as :mod:`analytics.sweep` tasks (one
  ``run_point`` per cell x replication), the table of means with 95 % t-intervals and the shape
  verdicts within the bands (issue 17).

Reading the inputs from the store is the service layer's job (:mod:`analytics.services.power`);
this package is pure (frames and arrays in, frames and records out).

Units are in names: ``_s`` seconds, ``_min`` minutes, ``_w`` watts, ``_j`` joules, ``milli``
thousandths of a GPU (GPU-sharing pods of the Alibaba openb trace request fractions of one GPU;
the engine counts capacity in milli-GPUs so occupancy arithmetic is exact).
"""

from analytics.power.arrivals import (
    GROUP_NAMES,
    ArrivalModel,
    GroupModel,
    alr_inverse,
    fit_arrival_model,
    resource_groups,
)
from analytics.power.engine import PowerPoolEngine, SimParams, SimResult, simulate
from analytics.power.experiments import (
    DEFAULT_SHARES,
    DEFAULT_UTILIZATIONS,
    Scenario,
    ScenarioResult,
    daily_profile,
    run_scenario,
    shape_report,
    sweep,
)
from analytics.power.inference import (
    InferenceLoad,
    demand_shape,
    inference_load,
    synthetic_demand,
)
from analytics.power.inputs import (
    LEFT_OUT_LISTED,
    NO_JOBS_HINT,
    SPARSE_EMPTY_SHARE,
    PowerInputs,
    candidate_datasets,
    capped_jobs,
    clock_offset_for,
    demand_density,
    describe_inputs,
    left_out_jobs,
    prepare_inputs,
    too_sparse,
)
from analytics.power.jobs import JobArrays, generate_jobs
from analytics.power.measured import (
    ACME_KALOS_POWER_W,
    ACME_PCT,
    HW_FACTOR_A100_TO_H100,
    SPEEDS,
    TEMPLATE_MODELS,
    TEMPLATES,
    LLMTemplate,
    acme_power_quantiles,
    sample_batch_power,
    templates_from_mlenergy,
)
from analytics.power.metrics import RAMP_HORIZONS_MIN, power_metrics
from analytics.power.requests import (
    RequestGroup,
    RequestModel,
    fit_request_model,
    generate_requests,
    revealed_capacity,
)
from analytics.power.scheduler import BACKFILL_POLICIES, QUEUE_ORDERS, SCHEDULERS

__all__ = [
    "ACME_KALOS_POWER_W", "ACME_PCT", "BACKFILL_POLICIES", "DEFAULT_SHARES",
    "DEFAULT_UTILIZATIONS", "GROUP_NAMES", "HW_FACTOR_A100_TO_H100", "LEFT_OUT_LISTED",
    "NO_JOBS_HINT",
    "QUEUE_ORDERS", "RAMP_HORIZONS_MIN", "SCHEDULERS", "SPARSE_EMPTY_SHARE", "SPEEDS",
    "TEMPLATES", "TEMPLATE_MODELS",
    "ArrivalModel", "GroupModel", "InferenceLoad", "JobArrays", "LLMTemplate", "PowerInputs",
    "PowerPoolEngine", "RequestGroup", "RequestModel", "Scenario", "ScenarioResult", "SimParams",
    "SimResult", "acme_power_quantiles", "alr_inverse", "candidate_datasets", "capped_jobs",
    "clock_offset_for",
    "daily_profile", "demand_density", "demand_shape", "describe_inputs", "fit_arrival_model",
    "fit_request_model",
    "generate_jobs", "generate_requests", "revealed_capacity", "inference_load", "left_out_jobs",
    "power_metrics", "prepare_inputs", "resource_groups", "run_scenario", "sample_batch_power",
    "shape_report", "simulate", "sweep", "synthetic_demand", "templates_from_mlenergy", "too_sparse",
]
