"""The cost model's out-of-fold fits as sweep tasks (issue 17): one task per (target, fold
scheme, fold), so the cross-validation behind the advisor backtest (OmniPilot paper, Sec. 3.2
and 4: grouped folds by workload cell, random folds for comparison) runs on a local process
pool or a Dask cluster and is kept in the store's ``sweep_runs``.

A task fits the three LightGBM quantile regressors of one fold on its training rows and returns
the held-out rows' log-space predictions (:func:`analytics.advisor.model.predict_fold`, the
same function the in-process fit calls; each fit is single-threaded and seeded, so every
backend gives bit-identical numbers, and JSON keeps a float exactly). The fold plan (features,
log targets, splits) is the sweep's shared data, sent once per worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict

import numpy as np

from analytics.advisor import model as cm

#: Store key name (``sweep_runs.analysis``) and task function of a fold fit.
ANALYSIS = "advisor.fold"
FN = "analytics.advisor.fold_points:fold_point"


def _fit_params(p: cm.FitParams) -> dict:
    """The fit settings a fold's numbers depend on (the seed is the task's seed)."""
    d = asdict(p)
    d.pop("seed")
    d.pop("targets")
    return d


def fold_point(params: dict, seed: int, *, folds: dict) -> dict:
    """One fold fit.

    Parameters
    ----------
    params : ``target``, ``scheme`` (``"grouped"`` / ``"random"``), ``fold`` (index) and
        ``fit`` (:class:`~analytics.advisor.model.FitParams` fields but ``seed`` / ``targets``)
    seed : the fit seed (LightGBM ``random_state``)
    folds : target -> ``{"X", "y", "splits"}`` of :func:`analytics.advisor.model.fold_plan`

    Returns
    -------
    dict: ``pred``, the held-out rows' log-space q10 / q50 / q90, a list of ``[lo, mid, hi]``
    in the order of the fold's test positions.
    """
    d = folds[params["target"]]
    train, test = d["splits"][params["scheme"]][int(params["fold"])]
    p = cm.FitParams(**params["fit"], seed=int(seed))
    return {"pred": cm.predict_fold(d["X"], d["y"], train, test, p).tolist()}


def tasks(plan: dict, p: cm.FitParams) -> list:
    """One :class:`~analytics.sweep.Task` per fold job of ``plan`` (:func:`cm.fold_jobs`)."""
    from analytics.sweep import Task

    fit = _fit_params(p)
    return [Task(ANALYSIS, FN, {"target": t, "scheme": s, "fold": k, "fit": fit}, p.seed)
            for t, s, k in cm.fold_jobs(plan)]


def key_inputs(datasets_sha256: dict[str, str]) -> dict[str, str]:
    """The ``sweep_runs`` key inputs of a fold sweep: the sha256 of every input dataset and the
    code version of the fit's feature and read modules with the versions of LightGBM and
    scikit-learn (the fits and the fold splits): :func:`analytics.advisor.persist.code_version`.
    """
    from analytics.advisor import persist

    return {**datasets_sha256, "advisor_code": persist.code_version()}


def runner(*, store=None, backend: str | None = None, key_inputs: dict | None = None,
           progress: Callable | None = None, cancel: Callable | None = None,
           runs: list | None = None) -> cm.FoldRunner:
    """A :data:`~analytics.advisor.model.FoldRunner` on :func:`analytics.sweep.run_sweep`.

    Parameters are those of ``run_sweep``; ``runs``, when given, receives the
    :class:`~analytics.sweep.SweepResult` of the sweep (its ``summary()`` goes into a CLI
    document). Raises what ``run_sweep`` raises (``SweepCancelled``, a task's exception).
    """
    from analytics.sweep import run_sweep

    def run(plan: dict, p: cm.FitParams) -> dict:
        shared = {"folds": {t: {"X": d["X"], "y": d["y"], "splits": d["splits"]}
                            for t, d in plan.items()}}
        todo = tasks(plan, p)
        res = run_sweep(todo, shared=shared, key_inputs=key_inputs, store=store,
                        backend=backend, progress=progress, cancel=cancel)
        if runs is not None:
            runs.append(res)
        return {(t.params["target"], t.params["scheme"], t.params["fold"]):
                np.asarray(r["pred"], dtype=float).reshape(-1, len(cm.QUANTILES))
                for t, r in zip(todo, res.results, strict=True)}

    return run

