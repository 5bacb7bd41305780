"""The hybrid power engine's settings and its result: :class:`SimParams` (the knobs of one run,
each documenting itself through :mod:`analytics.params`) and :class:`SimResult` (the flat records
a run produced). :mod:`analytics.power.engine` runs them; :func:`analytics.power.simulate` is the
entry point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analytics.params import check, knob
from analytics.power.scheduler import SCHEDULERS


@dataclass(frozen=True)
class SimParams:
    """Engine settings (each field documents itself: :func:`analytics.params.help_of`).

    Attributes
    ----------
    capacity_gpus : GPUs in the pool
    scheduler : ``"fcfs"`` (first-come first-served by submit time) or ``"swf"`` (smallest work
        first: GPU request, then realised runtime; paper, Methods, "Batch scheduling")
    backfill : let later jobs start ahead of a blocked head job if they cannot delay its
        reservation (see :func:`simulate`)
    checkpoint_min : segment length l; ``None`` runs each job in one piece
    inference_cap_gpus : most GPUs inference may hold (``None``: the whole pool, uncapped)
    backfill_depth : queue entries behind the head examined per backfill pass

    Raises
    ------
    ValueError
        A field out of its bounds (:func:`analytics.params.check`).
    """

    capacity_gpus: int = knob(256, "GPUs in the pool", lo=1)
    scheduler: str = knob("fcfs", "batch queue order: fcfs (first-come first-served by submit "
                          "time) or swf (smallest work first: GPU request, then runtime)",
                          choices=SCHEDULERS)
    backfill: bool = knob(True, "let later jobs start ahead of a blocked head job if they cannot "
                          "delay its reservation (EASY backfilling)")
    checkpoint_min: float | None = knob(60.0, "checkpoint segment length l (None: each job runs "
                                        "in one piece)", "min", lo=0.0, lo_open=True)
    inference_cap_gpus: int | None = knob(None, "most GPUs inference may hold (None: the whole "
                                          "pool)")
    backfill_depth: int = knob(1000, "queue entries behind the head examined per backfill pass")

    def __post_init__(self):
        check(self)


@dataclass(frozen=True)
class SimResult:
    """What one run produced (flat records as DataFrames).

    Attributes
    ----------
    minutes : per-minute time averages over [0, horizon): ``minute``, ``batch_gpus``,
        ``inference_gpus``, ``inference_demand_gpus``, ``batch_power_w``, ``inference_power_w``,
        ``total_power_w``, ``queued_jobs`` (at the minute's start)
    jobs : per job ``job``, ``submit_s``, ``first_start_s``, ``end_s`` (NaN if not reached),
        ``gpu_milli``, ``runtime_s``, ``group``
    segments : per started segment ``job``, ``segment``, ``start_s``, ``end_s``, ``gpu_milli``,
        ``power_w`` (only with ``record=True``)
    reservations : ``job``, ``time_s``, ``reservation_s`` each time a blocked head job got a
        reservation (only with ``record=True``)
    event_times_s : ndarray of the time of every processed event, in processing order (only with
        ``record=True``)
    n_events : events processed
    capacity_gpus : pool size
    """

    minutes: pd.DataFrame
    jobs: pd.DataFrame
    segments: pd.DataFrame
    reservations: pd.DataFrame
    event_times_s: np.ndarray
    n_events: int
    capacity_gpus: int


_EMPTY: dict[type, pd.DataFrame] = {}


def records_frame(records: list, kind: type) -> pd.DataFrame:
    """A frame of named-tuple records, columns ``kind._fields`` (an empty list, as most runs
    keep, is a copy of one frame built once)."""
    if records:
        return pd.DataFrame(records, columns=list(kind._fields))
    if kind not in _EMPTY:
        _EMPTY[kind] = pd.DataFrame([], columns=list(kind._fields))
    return _EMPTY[kind].copy()
