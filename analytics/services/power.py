"""Power service (hybrid power paper): read a job trace and an inference trace from the store,
fit the simulation inputs, run one scenario or the inference-share sweep.

The inference trace's demand target is resolved by :func:`analytics.services.demand.
resolve_target` (tokens, or GPU-seconds for traces without tokens), like every other analysis.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd

from analytics import power, store
from analytics.ingest.localtime import zone_offset_h
from analytics.power import requests
from analytics.services import demand

#: Inference shares of the sweep (0, 0.1, ..., 1).
SWEEP_SHARES = tuple(round(x / 10, 1) for x in range(11))


def candidates(con, dense_first: bool = True) -> tuple[list[str], list[str]]:
    """Job datasets (most rows first) and demand datasets at 1-minute resolution or finer
    (inference inputs: dense traces first, then token traces before GPU-seconds-only ones, then
    longest span first; a trace is sparse by :func:`analytics.power.too_sparse` on its share of
    empty minutes, :func:`analytics.store.demand_minutes`, one pass over the request rows that
    ``dense_first=False`` skips when the order of the demand datasets does not matter)."""
    ledger = store.list_datasets(con)
    requests = ledger[ledger["kind"] == "requests"]
    without = frozenset(name for name, dataset_id in zip(requests["name"], requests["dataset_id"],
                                                         strict=True)
                        if not store.request_fields(con, int(dataset_id))["tokens"])
    sparse = frozenset()
    if dense_first:
        minutes = store.demand_minutes(con)
        sparse = frozenset(name for name, active, span in zip(
            minutes["name"], minutes["active_min"], minutes["span_min"], strict=True)
            if span > 0 and power.too_sparse(1.0 - active / span))
    return power.candidate_datasets(ledger, without, sparse)


#: Inference arrival models: replay a trace, or the paper's request groups (NB minute counts).
INFERENCE_MODELS = ("replay", "groups")

GROUPS_HINT = ("the request-group model is fitted on the Azure LLM 2023 code and conversation "
               "traces: ingest AzureLLMInferenceTrace_code.csv and AzureLLMInferenceTrace_conv.csv "
               "(`headroom ingest FILE` or the Data page)")


def request_traces(con) -> list[str]:
    """Names of the Azure LLM request datasets in the store (the request-group model's
    inputs), oldest first."""
    ledger = store.list_datasets(con)
    rows = ledger[(ledger["kind"] == "requests") & (ledger["format"] == "azure_llm")]
    return rows.sort_values("dataset_id")["name"].tolist()


def fit_request_model(con, seed: int = 0, n_templates: int = 7):
    """Fit :class:`~analytics.power.requests.RequestModel` on every Azure LLM request dataset of
    the store and attach its replay validation (:func:`analytics.power.requests.validate`,
    generator seeded with ``seed``).

    Raises
    ------
    ValueError
        No Azure LLM trace in the store (the message says what to ingest).
    """
    names = request_traces(con)
    if not names:
        raise ValueError(GROUPS_HINT)
    model = requests.fit_request_model([(n, store.dataset_rows(con, n)) for n in names])
    return dataclasses.replace(model, validation=requests.validate(
        model, np.random.default_rng(seed), n_templates))


def jobs_per_day(con, jobs_name: str) -> pd.DataFrame:
    """The batch demand of a job trace, read before any fit (the Power page's first chart):
    ``day`` (UTC date of submission), ``jobs`` (GPU jobs that ran) and ``gpu_h`` (their
    GPU-hours: ``gpu_milli / 1000 x runtime_s / 3600``), one row per day with a submission.
    The jobs :func:`analytics.store.gpu_jobs` keeps (started, ended, with GPUs). Raises
    UnknownDataset."""
    jobs = store.gpu_jobs(con, jobs_name)
    day = pd.to_datetime(jobs["submit_ts"]).dt.floor("D")
    gpu_h = jobs["gpu_milli"].to_numpy(float) / 1000 * jobs["runtime_s"].to_numpy(float) / 3600
    return (pd.DataFrame({"day": day, "jobs": 1, "gpu_h": gpu_h}).groupby("day", as_index=False)
            .sum())


def load_inputs(con, jobs_name: str | None, inference_name: str | None, seed: int = 0,
                clock_offset_h: float | None = None, inference_model: str = "replay"):
    """Read a job trace and an inference trace and fit :class:`~analytics.power.PowerInputs`.

    Parameters
    ----------
    jobs_name : a ``jobs`` dataset (``None``: the one with the most rows)
    inference_name : a demand dataset at 1-minute resolution or finer, ``"synthetic"`` for the
        labelled synthetic envelope, or ``None`` for the first of :func:`candidates` (the
        longest dense token trace; synthetic when there is none). A trace too sparse to
        represent serving load is simulated as asked, with the warning in the inputs'
        ``density``
    seed : seed of the arrival-model fit
    clock_offset_h : hours from UTC to the job trace's site clock (``None``: the offset of the
        dataset's ``source_tz`` at its median submit time, else from its format)
    inference_model : ``"replay"`` (the inference trace, repeated) or ``"groups"`` (the paper's
        request-group model fitted on the store's Azure LLM traces, :func:`fit_request_model`;
        ``inference_name`` is then not used)

    GPU jobs the arrival model cannot use (never started, no end, End before Start, zero run
    time) are named with the reason in the inputs' ``left_out`` and counted in a note; none is
    dropped silently.

    Raises
    ------
    ValueError
        No job trace (the message says how to add one), a dataset of the wrong kind, or fewer
        than 10 GPU jobs, an unknown ``inference_model``, or ``"groups"`` without an Azure LLM
        trace. ``store.UnknownDataset`` for an unknown name.
    """
    if inference_model not in INFERENCE_MODELS:
        raise ValueError(f"inference_model must be one of {INFERENCE_MODELS}, got "
                         f"{inference_model!r}")
    model = fit_request_model(con, seed) if inference_model == "groups" else None
    jobs_all, demand_all = candidates(con, dense_first=inference_name is None)
    jobs_name = jobs_name or (jobs_all[0] if jobs_all else None)
    if jobs_name is None:
        raise ValueError(power.NO_JOBS_HINT)
    info = store.dataset(con, jobs_name)
    if info["kind"] != "jobs":
        raise ValueError(f"{jobs_name} holds {info['kind']} rows, not jobs; {power.NO_JOBS_HINT}")
    jobs = store.gpu_jobs(con, jobs_name)
    source_tz = info.get("source_tz") if isinstance(info.get("source_tz"), str) else None
    dropped = store.gpu_jobs_left_out(con, jobs_name)
    left_out, left_note = power.left_out_jobs(dropped, source_tz)
    if len(jobs) < 10:
        raise ValueError(f"{jobs_name}: only {len(jobs)} GPU jobs with start and end times; "
                         "the arrival model needs at least 10" +
                         (f" ({left_note})" if left_note else ""))
    clock_note = None
    if clock_offset_h is None and source_tz:
        mid = pd.Timestamp(jobs["submit_ts"].median()).to_pydatetime()
        clock_offset_h = zone_offset_h(source_tz, mid)
        clock_note = (f"site clock {source_tz}: UTC{clock_offset_h:+g} h at the trace's median "
                      "submit time (the dataset's time zone)")
    if clock_offset_h is None:
        clock_offset_h = power.clock_offset_for(info["format"])
    if model is not None:
        inference_name = request_traces(con)[0]
    elif inference_name is None:
        inference_name = demand_all[0] if demand_all else None
    grid = None
    if inference_name not in (None, "synthetic"):
        grid = demand.grid(con, demand.GridRequest(inference_name, 60))
    inputs = power.prepare_inputs(jobs, grid, np.random.default_rng(seed), jobs_name,
                                  inference_name, clock_offset_h, store.reference_cdfs(con))
    notes = tuple(n for n in (left_note, clock_note) if n)
    largest = jobs.nlargest(power.LEFT_OUT_LISTED, "gpu_milli", keep="first")
    inputs = dataclasses.replace(inputs, notes=(*inputs.notes, *notes), left_out=left_out,
                                 left_out_total=len(dropped), largest_jobs=tuple(
                                     zip(largest["job_id"].astype(str),
                                         largest["gpu_milli"].astype(int), strict=True)))
    if model is None:
        return inputs
    label = ("request groups (negative-binomial minute counts) fitted on "
             + " + ".join(g for g in dict.fromkeys(g.source for g in model.groups)))
    kept = tuple(n for n in inputs.notes if not n.startswith("the inference trace"))
    return dataclasses.replace(inputs, request_model=model, demand_start=model.replay_start,
                               inference_label=label, notes=(*model.notes, *kept))


def run(inputs, scenario, seed: int = 0) -> dict:
    """One scenario: ``frame`` (per minute), ``metrics`` (CV, ramps), ``daily`` profile,
    ``inputs`` (provenance), ``synthetic`` and ``warnings`` (:func:`warnings`)."""
    res = power.run_scenario(inputs, scenario, np.random.default_rng(seed))
    return {"frame": res.frame, "metrics": res.metrics, "daily": power.daily_profile(res.frame),
            "inputs": power.describe_inputs(inputs, scenario), "synthetic": inputs.synthetic,
            "warnings": warnings(inputs, scenario.n_gpus)}


def warnings(inputs, n_gpus: int | None = None) -> list[str]:
    """What a result must say before its numbers: the inference trace is too sparse to
    represent serving load (:func:`analytics.power.demand_density`), and, for a pool of
    ``n_gpus``, the trace's jobs that ask for more GPUs than the pool and are simulated on the
    whole pool (:func:`analytics.power.capped_jobs`, named in ``inputs.capped_jobs``)."""
    out = [w] if (w := inputs.density.get("warning")) else []
    if n_gpus is not None:
        listed, total = power.capped_jobs(inputs, n_gpus)
        if total:
            names = ", ".join(f"{j['job_id']} ({j['gpus']:g} GPUs)" for j in listed[:5])
            out.append(f"{total} job(s) of the trace ask for more GPUs than the {n_gpus}-GPU "
                       f"pool (largest: {names}); their simulated copies are capped at "
                       f"{n_gpus} GPUs (inputs.capped_jobs)")
    return out


def sweep_key_inputs(con, inputs, fit_seed: int = 0, clock_offset_h: float | None = None
                     ) -> dict[str, str]:
    """What a sweep's fitted inputs were built from, for the ``sweep_runs`` key: the sha256 of
    the job and inference datasets (``"synthetic"`` for the envelope), the inference model
    (replay, or the request groups with the sha256 of the traces they were fitted on), the fit
    seed and the
    requested clock offset (``"auto"``: from the dataset)."""
    def sha(name: str) -> str:
        return "synthetic" if name in (None, "synthetic") else str(store.dataset(con, name)["sha256"])
    model = ("replay" if inputs.request_model is None else
             "groups:" + ",".join(sha(name) for name in request_traces(con)))
    return {"jobs": sha(inputs.jobs_label),
            "inference": (model if inputs.request_model is not None else
                          sha(None if inputs.synthetic else inputs.inference_label)),
            "inference_model": model,
            "fit_seed": str(int(fit_seed)),
            "clock_offset_h": "auto" if clock_offset_h is None else f"{clock_offset_h:g}"}


def sweep(inputs, base, utilizations: tuple[float, ...], replications: int = 2, seed: int = 0,
          shares: tuple[float, ...] = SWEEP_SHARES,
          progress: Callable[..., None] | None = None, *,
          schedulers: tuple[str, ...] = (), checkpoints: tuple = (),
          store_path=None, key_inputs: dict | None = None, backend: str | None = None,
          cancel: Callable[[], bool] | None = None) -> tuple[pd.DataFrame, dict, dict]:
    """Inference-share sweep at each utilization (x scheduler x checkpoint) on the sweep runner
    (:func:`analytics.sweep.run_sweep`): (table, shape, run).

    The base scenario's share and utilization are ignored (the sweep sets both); empty
    ``schedulers`` / ``checkpoints`` keep the base's. ``table``: one row per cell, means with
    95 % t-intervals (:func:`analytics.power.sweep_points.sweep_table`); ``shape``: the verdicts
    with their uncertainty (:func:`~analytics.power.sweep_points.shape_verdicts`); ``run``:
    :meth:`analytics.sweep.SweepResult.summary` (computed / cached, backend, timing). With
    ``store_path`` (and ``key_inputs`` from :func:`sweep_key_inputs`) finished points are kept
    in the store and read back instead of recomputed.

    Raises
    ------
    analytics.sweep.SweepCancelled
        ``cancel()`` returned True; finished points are stored.
    ValueError
        Bad parameters, or no Dask scheduler at ``backend``.
    """
    from analytics.power import sweep_points
    from analytics.sweep import run_sweep

    tasks = sweep_points.point_tasks(base, shares, utilizations, schedulers, checkpoints,
                                     replications, seed)
    res = run_sweep(tasks, shared={"inputs": inputs}, key_inputs=key_inputs, store=store_path,
                    backend=backend, progress=progress, cancel=cancel)
    table = sweep_points.sweep_table(tasks, res.results)
    return table, sweep_points.shape_verdicts(table), res.summary()


def document(inputs, scenario, seed: int = 0, sweep_utilizations: tuple[float, ...] = (),
             shares: tuple[float, ...] = SWEEP_SHARES, replications: int = 2,
             progress: Callable[..., None] | None = None, **sweep_options) -> dict:
    """The ``headroom powersim`` document (one scenario, plus the sweep when
    ``sweep_utilizations`` is given: ``sweep`` rows with ``<metric>_lo95`` / ``_hi95``,
    ``shape`` verdicts with their uncertainty and ``sweep_run``; ``sweep_options`` go to
    :func:`sweep`); ``warnings`` lists :func:`warnings` (empty when none) and
    ``inputs.demand_density`` the figures behind them."""
    result = power.run_scenario(inputs, scenario, np.random.default_rng(seed))
    metrics = dict(result.metrics)
    out = {"cv": metrics.pop("cv"), "ramp_p50": metrics.pop("ramp_p50"), "sweep": [],
           "scenario": {**scenario.__dict__, "seed": seed}, "metrics": metrics}
    if sweep_utilizations:
        table, shape, run = sweep(inputs, scenario, sweep_utilizations, replications, seed,
                                  shares, progress, **sweep_options)
        out["sweep"] = table.to_dict("records")
        out["shape"] = shape
        out["sweep_run"] = run
    out["inputs"] = power.describe_inputs(inputs, scenario)
    out["synthetic"] = inputs.synthetic
    out["warnings"] = warnings(inputs, scenario.n_gpus)
    return out
