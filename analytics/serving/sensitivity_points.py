"""The serving sensitivity sweep as tasks of :mod:`analytics.sweep` (issue 17): one task per
(static scale, DVFS exponent) setting, each a call of :func:`run_point` (max-clock and Festina
on the same trace, :func:`analytics.serving.compare.sensitivity_row`).

The trace, its fit window and the profiles are the sweep's ``shared`` data (sent once per
worker); what they were built from goes into the key (:func:`analytics.services.serving.
sensitivity_key_inputs`). Every setting uses the what-if's own seed (the model assignment and
the oracle's noise), so the rows equal those of :func:`analytics.serving.compare.sensitivity`.
"""

from __future__ import annotations

from dataclasses import asdict, replace

import pandas as pd

from analytics.serving.compare import sensitivity_row
from analytics.serving.params import ServingParams
from analytics.sweep import Task

#: Store name of one sensitivity point (the first part of its ``sweep_runs`` key).
ANALYSIS = "serving.sensitivity_point"
#: The task function.
FN = "analytics.serving.sensitivity_points:run_point"
#: The sweep's default settings (as :func:`analytics.serving.compare.sensitivity`).
GAMMAS: tuple[float | None, ...] = (None, 1.5, 2.0, 3.0)
STATIC_SCALES: tuple[float, ...] = (0.5, 1.0, 1.5)
#: The row's columns in :func:`analytics.serving.compare.sensitivity`'s order (stored results
#: come back with their keys sorted).
COLUMNS = ("static_scale", "idle_w", "gamma", "calibrated", "max_clock_kwh", "festina_kwh",
           "saving", "ttft_pp", "tbt_pp", "festina_gpus_on", "festina_clock_mhz")


def run_point(params: dict, seed: int, *, trace: pd.DataFrame, profiles: list,
              fit: pd.DataFrame | None = None) -> dict:
    """One setting of the sensitivity sweep (a :mod:`analytics.sweep` task function).

    Parameters
    ----------
    params : the :class:`ServingParams` fields (``dataclasses.asdict``) with ``dvfs_gamma``
        (None = calibrated) and ``static_scale`` set
    seed : the model assignment's seed (replaces ``params["seed"]``)
    trace, profiles, fit : as :func:`analytics.serving.simulate` (shared by every task)

    Returns
    -------
    dict: the row of :func:`analytics.serving.compare.sensitivity` (``static_scale``,
    ``idle_w`` W, ``gamma``, ``calibrated``, ``max_clock_kwh``, ``festina_kwh``, ``saving``
    fraction, ``ttft_pp`` / ``tbt_pp`` percentage points, ``festina_gpus_on``,
    ``festina_clock_mhz``).

    Raises
    ------
    ValueError
        As :func:`analytics.serving.simulate` (bad parameter, no profile fits).
    """
    return sensitivity_row(trace, profiles, replace(ServingParams(**params), seed=int(seed)), fit)


def point_tasks(params: ServingParams, gammas=GAMMAS, static_scales=STATIC_SCALES
                ) -> list[Task]:
    """One task per (static scale, gamma), static scale outer (the row order of
    :func:`analytics.serving.compare.sensitivity`), each seeded with ``params.seed``."""
    return [Task(ANALYSIS, FN, asdict(replace(params, dvfs_gamma=None if g is None else float(g),
                                              static_scale=float(sc))), int(params.seed))
            for sc in static_scales for g in gammas]

