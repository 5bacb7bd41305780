"""Reading the hybrid power simulator's inputs from the store: the dataset ledger's candidates,
the defaults, and :func:`load_inputs` (moved unchanged from the former ``analytics.power.sim``;
the service layer will take them over).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analytics.power.inputs import PowerInputs, clock_offset_for, prepare_inputs

NO_JOBS_HINT = ("no job trace in the store: add one on the Data page or with `headroom ingest "
                "FILE` - an MIT SuperCloud Slurm export (slurm-log-queueing-clean.csv), Slurm "
                "`sacct --parsable2` output, or an Alibaba openb pod list "
                "(openb_pod_list_default.csv)")


def candidate_datasets(ledger: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Possible inputs in a dataset ledger (:func:`analytics.store.list_datasets`): ``jobs``
    datasets by rows, most first, and demand datasets (requests or series) at 1-minute
    resolution or finer by time span, longest first."""
    jobs = ledger[ledger["kind"] == "jobs"].sort_values("rows", ascending=False)
    demand = ledger[ledger["kind"].isin(["requests", "demand_series"])
                    & (ledger["resolution_s"].fillna(0) <= 60)].copy()
    demand["span"] = demand["ts_max"] - demand["ts_min"]
    demand = demand.sort_values(["span", "dataset_id"], ascending=[False, True])
    return jobs["name"].tolist(), demand["name"].tolist()


def default_datasets(con) -> tuple[str | None, str | None]:
    """The store's default inputs: the first of each list of :func:`candidate_datasets`
    (``None`` where there is none)."""
    from analytics import store

    jobs, demand = candidate_datasets(store.list_datasets(con))
    return (jobs[0] if jobs else None, demand[0] if demand else None)


def load_inputs(con, jobs_name: str | None, inference_name: str | None,
                rng: np.random.Generator, clock_offset_h: float | None = None) -> PowerInputs:
    """Read a job trace and an inference trace from the store and fit :class:`PowerInputs`.

    Parameters
    ----------
    con : store connection
    jobs_name : a ``jobs`` dataset (``None``: :func:`default_datasets`)
    inference_name : a demand dataset at 1-minute resolution or finer, ``"synthetic"`` for the
        labelled synthetic envelope, or ``None`` for the default (synthetic when the store has
        none)
    rng : generator for the fit
    clock_offset_h : hours from UTC to the job trace's site clock (``None``:
        :func:`clock_offset_for` its format)

    Raises
    ------
    ValueError
        No job trace (the message says how to add one), a dataset of the wrong kind, or too few
        GPU jobs. ``analytics.store.UnknownDataset`` for an unknown name.
    """
    from analytics import store
    from analytics.envelope import grid

    default_jobs, default_inf = default_datasets(con)
    jobs_name = jobs_name or default_jobs
    if jobs_name is None:
        raise ValueError(NO_JOBS_HINT)
    info = store.dataset(con, jobs_name)
    if info["kind"] != "jobs":
        raise ValueError(f"{jobs_name} holds {info['kind']} rows, not jobs; {NO_JOBS_HINT}")
    jobs = store.gpu_jobs(con, jobs_name)
    if len(jobs) < 10:
        raise ValueError(f"{jobs_name}: only {len(jobs)} GPU jobs with start and end times; "
                         "the arrival model needs at least 10")
    if clock_offset_h is None:
        clock_offset_h = clock_offset_for(info["format"])
    if inference_name is None:
        inference_name = default_inf
    demand = None
    if inference_name not in (None, "synthetic"):
        from analytics.config import Weights

        inf = store.dataset(con, inference_name)
        target = "weighted_tokens"
        if inf["kind"] == "requests" and not store.request_fields(
                con, int(inf["dataset_id"]))["tokens"]:
            target = "gpu_seconds"  # traces without tokens (Alibaba GenAI LoRA)
        demand = grid.demand_grid(con, inference_name, 60, Weights(target=target))
    return prepare_inputs(jobs, demand, rng, jobs_name, inference_name, clock_offset_h,
                          store.reference_cdfs(con))
