"""The power sweep as tasks of :mod:`analytics.sweep` (issue 17): one task per (utilisation,
scheduler, checkpoint length, inference share, replication), each a call of
:func:`run_point`, and the aggregation of their results into a table of means with 95 %
t-intervals and shape verdicts stated with their uncertainty.

The replications' seeds are drawn once from the sweep's seed and reused in every cell (common
random numbers, as :func:`analytics.power.experiments.sweep`): the same uniforms drive arrivals
and power draws at every share, so differences between cells come from the composition, and the
means equal those of :func:`~analytics.power.experiments.sweep` for the same seed.
"""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np
import pandas as pd

from analytics.power.experiments import Scenario, run_scenario, shape_report
from analytics.sweep import Task
from analytics.sweep import stats as S

#: Store name of one sweep point (the first part of its ``sweep_runs`` key).
ANALYSIS = "power.sweep_point"
#: The task function.
FN = "analytics.power.sweep_points:run_point"
#: The columns that identify a cell of the sweep table.
CELL = ["utilization", "scheduler", "checkpoint_min", "inference_share"]


def run_point(params: dict, seed: int, *, inputs) -> dict:
    """One replication of one sweep cell (a :mod:`analytics.sweep` task function).

    Parameters
    ----------
    params : the :class:`Scenario` fields (``dataclasses.asdict``)
    seed : seed of the run's generator (arrivals, per-job power draws)
    inputs : :class:`analytics.power.PowerInputs` (shared by every task of the sweep)

    Returns
    -------
    dict: ``ramp_1min``, ``ramp_5min``, ``ramp_15min`` (median ramps, fraction of mean power)
    and the other :attr:`ScenarioResult.metrics` of the window (``cv``, utilisation, shortfall,
    waits, ...; :func:`analytics.power.experiments.window_metrics` via :func:`run_scenario`).

    Raises
    ------
    ValueError
        Parameters out of the scenario's bounds.
    """
    res = run_scenario(inputs, Scenario(**params), np.random.default_rng(seed))
    metrics = dict(res.metrics)
    ramps = metrics.pop("ramp_p50")
    return {**{f"ramp_{k}": v for k, v in ramps.items()}, **metrics}


def replication_seeds(seed: int, replications: int) -> list[int]:
    """The replications' seeds, drawn once from ``default_rng(seed)``."""
    if replications < 1:
        raise ValueError("replications must be >= 1")
    return [int(x) for x in np.random.default_rng(seed).integers(2**62, size=replications)]


def point_tasks(base: Scenario, shares, utilizations, schedulers=(), checkpoints=(),
                replications: int = 3, seed: int = 0) -> list[Task]:
    """The sweep's tasks: utilisation x scheduler x checkpoint x share x replication.

    Parameters
    ----------
    base : the scenario whose other fields are kept
    shares, utilizations : inference shares in [0, 1], utilisations in (0, 1]
    schedulers : queue orders (empty: the base's)
    checkpoints : checkpoint lengths, min, None for none (empty: the base's)
    replications, seed : runs per cell and the seed their seeds are drawn from

    Raises
    ------
    ValueError
        replications < 1, or a value out of the scenario's bounds.
    """
    seeds = replication_seeds(seed, replications)
    tasks = []
    for u in utilizations:
        for sched in schedulers or (base.scheduler,):
            for ckpt in checkpoints or (base.checkpoint_min,):
                for share in shares:
                    cell = replace(base, utilization=float(u), scheduler=sched,
                                   checkpoint_min=None if ckpt is None else float(ckpt),
                                   inference_share=float(share))
                    tasks += [Task(ANALYSIS, FN, asdict(cell), s) for s in seeds]
    return tasks


def sweep_table(tasks: list[Task], results: list[dict]) -> pd.DataFrame:
    """One row per cell (:data:`CELL`, in task order): every metric's mean over the
    replications with ``<metric>_lo95`` / ``<metric>_hi95`` (95 % t-interval of the mean; NaN
    with one replication), and ``replications``."""
    return table_of([t.params for t in tasks], results)


def table_of(params: list[dict], results: list[dict]) -> pd.DataFrame:
    """:func:`sweep_table` of the points' parameters and results (e.g. a sweep read back from
    the store: :func:`analytics.store.sweep_points`)."""
    rows = pd.DataFrame([{**{c: p[c] for c in CELL}, **r}
                         for p, r in zip(params, results, strict=True)])
    metrics = [c for c in rows.columns if c not in CELL]
    rows["checkpoint_min"] = rows["checkpoint_min"].astype(float)  # None -> NaN: one group
    return S.replicate_table(rows, CELL, metrics)


def shape_verdicts(table: pd.DataFrame) -> dict:
    """Whether the sweep shows the paper's shapes, per (utilisation, scheduler, checkpoint),
    judged within the 95 % bands.

    ``u_shape_cv``: some interior share has a CV below both ends; ``hump_15min``: some interior
    share has a 15-minute ramp above both ends. Each is True when it holds at every value inside
    the bands, False when it fails at every value, else ``"not distinguishable"`` (also with
    one replication: no band). ``*_of_means`` is the verdict of the means alone
    (:func:`analytics.power.experiments.shape_report`). The bands are pointwise; replications
    share seeds across shares (common random numbers), so differences between shares are
    tighter than the bands suggest and the verdicts are conservative.

    Returns
    -------
    dict keyed ``"<U>"`` (one scheduler and checkpoint in the table) or
    ``"<U>/<scheduler>/<checkpoint min or none>"`` -> {"u_shape_cv", "u_shape_cv_of_means",
    "cv_min_share", "hump_15min", "hump_15min_of_means", "ramp15_max_share", "replications",
    "scheduler", "checkpoint_min"}
    """
    out = {}
    groups = table.groupby(["utilization", "scheduler", "checkpoint_min"], sort=False,
                           dropna=False)
    for (u, sched, ckpt), g in groups:
        g = g.sort_values("inference_share")
        means = shape_report(g)[f"{u:g}"]
        key = f"{u:g}" if groups.ngroups == table["utilization"].nunique() else (
            f"{u:g}/{sched}/{'none' if pd.isna(ckpt) else f'{ckpt:g}'}")
        out[key] = {
            "u_shape_cv": S.interior_below_ends(g["cv_lo95"], g["cv_hi95"]),
            "u_shape_cv_of_means": means["u_shape_cv"], "cv_min_share": means["cv_min_share"],
            "hump_15min": S.interior_above_ends(g["ramp_15min_lo95"], g["ramp_15min_hi95"]),
            "hump_15min_of_means": means["hump_15min"],
            "ramp15_max_share": means["ramp15_max_share"],
            "replications": int(g["replications"].min()), "scheduler": sched,
            "checkpoint_min": None if pd.isna(ckpt) else float(ckpt)}
    return out
