"""Streamlit caching of the what-if analyses: the launch advisor (Placement), the serving
simulator (Serving) and the hybrid power simulator (Power). The data, envelope, decision and
telemetry reads, and the caching machinery these build on (:func:`~analytics.ui.cache.cached`,
:func:`~analytics.ui.cache.memo`, the data version), are in :mod:`analytics.ui.cache`.

Every cached result is keyed on the store path and its data version plus the arguments. The
long simulations (serving run and sensitivity, power sweep) report progress while they run, so
they are memoised per server (:func:`~analytics.ui.cache.memo`) instead of ``st.cache_data``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import streamlit as st

from analytics import params
from analytics import power as power_sim
from analytics.advisor import decide, voi
from analytics.services import advisor, power, serving
from analytics.serving import ServingParams
from analytics.ui.cache import (
    _Refused,
    cached,
    connection,
    data_version,
    memo,
    memo_has,
    settings,
    store_stamp,
)

POWER_SHARES = power.SWEEP_SHARES


# --------------------------------------------------------------------------- launch advisor
def _advisor(progress=None) -> tuple[advisor.Advisor, str, dict | None]:
    """(advisor, cache, fold sweep) memoised per server on the data version and the backend:
    the fit stored beside the store (shared with the CLI), else a new one whose fold fits run
    on the sweep runner and are kept in the store's sweep_runs (a cancelled fit resumes)."""
    from analytics.ui import cluster

    db, backend = str(settings().db_path), cluster.backend()
    return memo("advisor", (db, data_version(), backend),
                lambda: advisor.fit_cached(db, settings().cache_dir, backend=backend,
                                           progress=progress), max_entries=2)


def interval_width_note(adv, ranked: pd.DataFrame, wide: float = 3.0) -> str | None:
    """Why the best ranked arm's q10-q90 throughput interval is wide (issue 31 item 7: a 15x
    interval shown without a word), or None when it spans less than ``wide`` times: how the
    cost model's intervals are calibrated and how large its held-out-cell errors are on this
    data (``metrics["throughput_tok_s"]``: rows, cells, the conformal offset in log space, the
    factor it widened the raw quantiles by, the median absolute percentage error)."""
    if ranked.empty or "throughput_tok_s_q10" not in ranked:
        return None
    best = ranked.iloc[0]
    lo, hi = float(best["throughput_tok_s_q10"]), float(best["throughput_tok_s_q90"])
    if not lo > 0 or hi / lo < wide:
        return None
    m = adv.cost.metrics.get("throughput_tok_s", {})
    off = (m.get("offset_log") or {}).get("held_out_cell")
    parts = [f"The best arm's q10-q90 throughput spans {hi / lo:.0f}x ({lo:,.0f} to "
             f"{hi:,.0f} tok/s)"]
    if m.get("rows"):
        parts.append(f"the cost model learned throughput from {m['rows']:,} runs in "
                     f"{m['cells']:,} workload cells, and its intervals are calibrated on cells "
                     "it did not see (CQR)")
    if off is not None:
        parts.append(f"on this data an unseen cell's error needs a margin of x{math.exp(off):.1f} "
                     "on each side" + (f" (mean absolute error {m['mape_pct']:.0f} %)"
                                       if m.get("mape_pct") is not None else ""))
    parts.append("benchmarks closer to this request (its model size, lengths and concurrency) "
                 "narrow it: see 'Benchmarks worth running'")
    return "; ".join(parts) + "."


def weight_bits(precision: str) -> float | None:
    """Bits per weight of a precision label (``awq`` -> 4, ``bf16`` -> 16; None when unknown:
    :func:`analytics.advisor.model.bits`)."""
    from analytics.advisor import model as cost_model

    got = cost_model.bits(pd.Series([precision])).iloc[0]
    return None if pd.isna(got) else float(got)


def advisor_ready() -> bool:
    """Whether the advisor for the current data is at hand without fitting: fitted already in
    this server, or stored for this data (:func:`analytics.services.advisor.fit_stored`)."""
    from analytics.ui import cluster
    from analytics.ui.cache import datasets

    db = str(settings().db_path)
    if memo_has("advisor", (db, data_version(), cluster.backend())):
        return True
    return advisor.fit_stored(datasets(), settings().cache_dir)  # the cached ledger


def advisor_model(progress=None) -> advisor.Advisor:
    """The fitted launch advisor for the current data (fit once per data version; the cost
    model's fold fits on the operator's Dask scheduler when one is set, else a local process
    pool). ``progress(done, total)`` hears of each fold fit (not part of the cache key).
    Raises ValueError when the store holds too few benchmark rows or no scheduler answers,
    and ``analytics.sweep.SweepCancelled`` on Cancel (finished folds stored)."""
    return _advisor(progress)[0]


def advisor_fit_note() -> str:
    """How the current advisor was obtained, in one sentence (call after :func:`advisor_model`)."""
    _, cache, run = _advisor()
    if cache == "hit":
        return "Cost model: the fit stored for this data (no refit)."
    if run is None:
        return "Cost model: fitted now."
    from analytics.ui.widgets import sweep_source

    return (f"Cost model: fitted now; its {run['tasks']} out-of-fold fits: "
            f"{sweep_source(run)}, {run['wall_s']:.1f} s.")


bench_catalog = cached(advisor.bench_catalog)
bench_support = cached(advisor.bench_support)


@st.cache_data(show_spinner=False)
def _advise(db_path: str, version: int, request: decide.Request, u: decide.UtilityParams):
    return advisor.advise(advisor_model(), request, u)


def advise(request: decide.Request, prices: dict, value_per_token: float = 2e-7,
           usd_per_kwh: float = 0.08, runtime_h: float = 1.0, restart_h: float = 0.5,
           kv_slope: float = 2.0) -> pd.DataFrame:
    """Scored arms for a request (:func:`analytics.services.advisor.advise`)."""
    u = decide.UtilityParams(value_per_token_usd=value_per_token, usd_per_kwh=usd_per_kwh,
                             runtime_h=runtime_h, restart_h=restart_h, kv_slope=kv_slope,
                             prices_usd_per_gpu_h=dict(prices))
    return _advise(str(settings().db_path), data_version(), request, u)


@st.cache_data(show_spinner=False)
def _advice_value(db_path: str, version: int, request: decide.Request, u: decide.UtilityParams):
    return advisor.value_analysis(_advise(db_path, version, request, u))


def advice_value(request: decide.Request, prices: dict, value_per_token: float = 2e-7,
                 usd_per_kwh: float = 0.08, runtime_h: float = 1.0, restart_h: float = 0.5,
                 kv_slope: float = 2.0) -> dict:
    """Launch decision, break-even value per token and the value-per-token sensitivity of the
    ranking for the same request and terms as :func:`advise`
    (:func:`analytics.services.advisor.value_analysis`)."""
    u = decide.UtilityParams(value_per_token_usd=value_per_token, usd_per_kwh=usd_per_kwh,
                             runtime_h=runtime_h, restart_h=restart_h, kv_slope=kv_slope,
                             prices_usd_per_gpu_h=dict(prices))
    return _advice_value(str(settings().db_path), data_version(), request, u)


@st.cache_data(show_spinner=False)
def _advisor_backtest(db_path: str, version: int, value_per_token: float) -> dict:
    return advisor.backtest(advisor_model(), value_per_token)


def backtest_verdict(bt: dict, value_per_token: float) -> dict | None:
    """The advisor against its best baseline in a backtest (a sentence; no computation)."""
    return advisor.backtest_verdict(bt, value_per_token)


def advisor_backtest(value_per_token: float = 2e-7) -> dict:
    """Leakage-free backtest (top-1, regret) of the advisor and the five baselines."""
    return _advisor_backtest(str(settings().db_path), data_version(), value_per_token)


@st.cache_data(show_spinner=False, max_entries=8)
def _voi_ranking(db_path: str, version: int, u: decide.UtilityParams, p: voi.VoIParams,
                 model: str | None = None):
    with connection() as con:
        return advisor.voi_ranking(con, advisor_model(), u, p, model)


@st.cache_data(show_spinner=False, max_entries=8)
def _voi_backtest(db_path: str, version: int, u: decide.UtilityParams, p: voi.VoIParams):
    with connection() as con:  # also kept on disk beside the store, shared with the CLI
        return advisor.voi_backtest(con, advisor_model(), u, p,
                                    cache_dir=settings().cache_dir)[0]


def voi_params(budget_node_h: float = 0.2, setup_min: float = 5.0) -> voi.VoIParams:
    """Settings of the benchmark gate (:class:`analytics.advisor.voi.VoIParams`)."""
    return voi.VoIParams(budget_node_h=budget_node_h, setup_min=setup_min)


def voi_ranking(prices: dict, gate: voi.VoIParams, value_per_token: float = 2e-7,
                usd_per_kwh: float = 0.08, runtime_h: float = 1.0, restart_h: float = 0.5,
                kv_slope: float = 2.0, model: str | None = None) -> tuple[pd.DataFrame, dict]:
    """Benchmarks worth running, ranked by expected gain per node-hour with the budget cut
    (:func:`analytics.services.advisor.voi_ranking`), for the page's utility terms and the
    model asked for."""
    u = decide.UtilityParams(value_per_token_usd=value_per_token, usd_per_kwh=usd_per_kwh,
                             runtime_h=runtime_h, restart_h=restart_h, kv_slope=kv_slope,
                             prices_usd_per_gpu_h=dict(prices))
    return _voi_ranking(str(settings().db_path), data_version(), u, gate, model)


def voi_backtest(prices: dict, gate: voi.VoIParams, value_per_token: float = 2e-7,
                 usd_per_kwh: float = 0.08, runtime_h: float = 1.0, restart_h: float = 0.5,
                 kv_slope: float = 2.0) -> dict:
    """Regret-vs-benchmark-node-hours curves of the VoI, uncertainty, random and cheapest-first
    policies (:func:`analytics.services.advisor.voi_backtest`)."""
    u = decide.UtilityParams(value_per_token_usd=value_per_token, usd_per_kwh=usd_per_kwh,
                             runtime_h=runtime_h, restart_h=restart_h, kv_slope=kv_slope,
                             prices_usd_per_gpu_h=dict(prices))
    gate = replace(gate, budget_node_h=1.0)  # the backtest spends every benchmark: no budget
    return _voi_backtest(str(settings().db_path), data_version(), u, gate)


def voi_node_hours_rule(gate: voi.VoIParams) -> str:
    """The node-hour rule of a benchmark, as a sentence (an assumption, shown on the page)."""
    return advisor.NODE_HOURS_RULE.format(setup=gate.setup_min, gpn=gate.gpus_per_node)


def default_prices() -> dict:
    """USD per GPU-hour where a list price is sourced."""
    return advisor.default_prices()


def hardware_specs() -> pd.DataFrame:
    """The accelerator spec table with its sources (for display)."""
    return advisor.hardware_specs()


@st.cache_data(show_spinner=False, max_entries=4)
def _model_versions(db_path: str, stamp: tuple) -> pd.DataFrame:
    with connection() as con:
        return advisor.model_versions(con)


def model_versions() -> pd.DataFrame:
    """Advisor model versions (provenance), newest first; cached on :func:`store_stamp`, so a
    recorded version (a write) shows at once."""
    path = settings().db_path
    return _model_versions(str(path), store_stamp(path))


def record_model_version() -> dict:
    """Gate the current fitted model against the incumbent and record it."""
    model = advisor_model()  # before the write connection: it reads through its own
    with connection(write=True) as con:
        return advisor.record_model_version(con, model)


def advisor_slo_models(request: decide.Request) -> dict:
    """Which SLOs of the request have a model (:func:`analytics.services.advisor.slo_models`)."""
    return advisor.slo_models(advisor_model(), request)


def advisor_request(**kwargs) -> decide.Request:
    """A :class:`analytics.advisor.decide.Request` (pages may not import the advisor)."""
    return decide.Request(**kwargs)


# --------------------------------------------------------------------------- serving (Festina)
serving_inputs = cached(serving.inputs)
_serving_curves = cached(serving.curves)


def serving_help(field: str) -> str:
    """Widget help of a serving what-if knob (the same text as the CLI flag's help)."""
    return params.help_of(ServingParams, field)


def serving_params(**kwargs) -> ServingParams:
    """A :class:`analytics.serving.ServingParams` (pages may not import the engine)."""
    return ServingParams(**kwargs)


def serving_run(trace: str, params: ServingParams, measured: bytes | None = None,
                progress=None) -> dict:
    """All serving policies on a stored trace on the sweep runner, one task per policy
    (:func:`analytics.services.serving.run_policies`), kept per server on data version,
    parameters and the uploaded profile bytes, and each policy run in the app's store
    (``sweep_runs``): after a restart or a Cancel only the missing policies are computed. Runs
    on the operator's Dask scheduler when one is set (:func:`analytics.ui.cluster.backend`),
    else a local process pool. ``progress(done, total, label)`` hears of each policy run; the
    views of :func:`analytics.services.serving.run_views` plus ``policies_run`` (the runner's
    summary). Raises ValueError (an invalid profile CSV, no profiles, no scheduler at the
    address); a refusal is kept too."""
    from analytics.ui import cluster

    db, version = str(settings().db_path), data_version()
    backend = cluster.backend()

    def compute():
        try:
            with connection() as con:  # closed before the policies run
                inputs = serving.policy_inputs(con, trace, params, serving.ALL_POLICIES,
                                               measured)
            comp, run = serving.run_policies(inputs, params, store_path=db, backend=backend,
                                             progress=progress)
        except ValueError as exc:
            return _Refused(exc)
        return serving.views(comp, inputs["shared"]["trace"]) | {"policies_run": run}
    out = memo("serving_run", (db, version, trace, params, measured), compute, max_entries=16)
    if isinstance(out, _Refused):
        raise out.exc
    return out


def serving_sensitivity(trace: str, params: ServingParams, measured: bytes | None = None,
                        progress=None) -> pd.DataFrame:
    """Festina vs max-clock over gamma x static power on the sweep runner (cached); see
    :func:`analytics.services.serving.run_sensitivity`. Settings are kept in the app's store
    (``sweep_runs``): after a restart or a Cancel only the missing ones are computed. Runs on
    the operator's Dask scheduler when the operator set one (:func:`analytics.ui.cluster.backend`), else a
    local process pool. ``progress(done, total, label)`` hears of each setting (not part of the
    cache key); ``.attrs["sweep_run"]`` is the runner's summary.

    Raises ValueError (bad parameter, no usable profile, no scheduler at the address)."""
    from analytics.ui import cluster

    db, version = str(settings().db_path), data_version()
    backend = cluster.backend()

    def compute() -> pd.DataFrame:
        with connection() as con:  # closed before the settings run
            inputs = serving.sensitivity_inputs(con, trace, params, measured)
        return serving.run_sensitivity(inputs, params, store_path=db, backend=backend,
                                       progress=progress)
    return memo("serving_sensitivity", (db, version, trace, params, measured), compute)


def serving_prediction_sweep(trace: str, params: ServingParams, measured: bytes | None = None,
                             progress=None) -> pd.DataFrame:
    """Festina vs max-clock per output-length predictor (cached); ``progress(done, total,
    label)`` hears of each row (not part of the cache key)."""
    db, version = str(settings().db_path), data_version()

    def compute() -> pd.DataFrame:
        with connection() as con:
            return serving.prediction_sweep(con, trace, params, measured, _on_step=progress)
    return memo("serving_prediction_sweep", (db, version, trace, params, measured), compute)


def serving_curves(gpu: str, gamma: float | None = None, batch: int = 32,
                   measured: bytes | None = None, static_scale: float = 1.0) -> pd.DataFrame:
    """Energy per token vs clock per profile and phase (the profile viewer)."""
    return _serving_curves(gpu, gamma, batch, measured, static_scale)


def serving_dvfs_sources(gpu: str) -> list[tuple[str, str]]:
    """Citations of the clock range and static power of a GPU kind."""
    return serving.dvfs_sources(gpu)


# --------------------------------------------------------------------------- power
_power_candidates = cached(power.candidates)


def power_datasets() -> tuple[list[str], list[str]]:
    """Job datasets (most rows first) and demand datasets at 1 minute or finer (longest
    first)."""
    return _power_candidates()


def power_default_inference() -> str | None:
    """The default inference input: the dense token trace spanning the longest time (a
    GPU-seconds trace only when there is no dense token trace, a sparse one only when there is
    no dense one; :func:`analytics.services.power.candidates`)."""
    demand_names = power_datasets()[1]
    return demand_names[0] if demand_names else None


def power_no_jobs_hint() -> str:
    """What to ingest to get a job trace."""
    return power_sim.NO_JOBS_HINT


@st.cache_data(show_spinner="Fitting the batch arrival model ...", max_entries=8)
def _power_inputs(db_path: str, version: int, jobs_name: str, inference_name: str, seed: int,
                  inference_model: str = "replay"):
    with connection() as con:
        return power.load_inputs(con, jobs_name, inference_name, seed,
                                 inference_model=inference_model)


def power_help(field: str) -> str:
    """Widget help of a power scenario knob (the same text as the CLI flag's help)."""
    return params.help_of(power_sim.Scenario, field)


def power_scenario_of(**kwargs):
    """A :class:`analytics.power.Scenario`. Raises ValueError for out-of-range settings."""
    return power_sim.Scenario(**kwargs)


@st.cache_data(show_spinner="Simulating the scenario ...", max_entries=32)
def _power_run(db_path: str, version: int, jobs_name: str, inference_name: str, scenario,
               seed: int, inference_model: str = "replay") -> dict:
    inputs = _power_inputs(db_path, version, jobs_name, inference_name, seed, inference_model)
    return power.run(inputs, scenario, seed)


jobs_per_day = cached(power.jobs_per_day)


def power_run(jobs_name: str, inference_name: str, scenario, seed: int = 0,
              inference_model: str = "replay") -> dict:
    """One scenario: ``frame`` (per minute), ``metrics``, ``daily`` profile, ``inputs``
    (provenance) and ``synthetic``. ``inference_model``: ``"replay"`` the inference trace or
    ``"groups"`` (the request-group model on the store's Azure LLM traces). Raises ValueError
    (no / too few GPU jobs, no Azure LLM trace for ``"groups"``), GridError."""
    return _power_run(str(settings().db_path), data_version(), jobs_name, inference_name,
                      scenario, seed, inference_model)


def power_sweep(jobs_name: str, inference_name: str, base, utilizations: tuple,
                replications: int = 2, seed: int = 0, progress=None,
                inference_model: str = "replay") -> tuple:
    """Inference-share sweep (0, 0.1, ..., 1) at each utilization on the sweep runner:
    (table with 95 % bands, shape verdicts with their uncertainty, run summary); see
    :func:`analytics.services.power.sweep`. The base scenario's share is ignored, so moving the
    share slider reuses the cached sweep. Points are kept in the app's store (``sweep_runs``):
    after a restart or a Cancel only the missing ones are computed. Runs on the operator's Dask
    scheduler when the operator set one (:func:`analytics.ui.cluster.backend`), else a local process
    pool. ``progress(done, total)`` hears of each point (not part of the cache key).

    Raises ValueError (no job trace, no scheduler at the address)."""
    from analytics.ui import cluster

    base = replace(base, inference_share=0.5, utilization=0.5)
    db, version, utils = str(settings().db_path), data_version(), tuple(sorted(utilizations))
    backend = cluster.backend()

    def compute() -> tuple:
        inputs = _power_inputs(db, version, jobs_name, inference_name, seed, inference_model)
        with connection() as con:  # closed before the points run
            key_inputs = power.sweep_key_inputs(con, inputs, seed)
        return power.sweep(inputs, base, utils, replications, seed, progress=progress,
                           store_path=db, key_inputs=key_inputs, backend=backend)
    return memo("power_sweep", (db, version, jobs_name, inference_name, base, utils,
                                replications, seed, inference_model), compute)
