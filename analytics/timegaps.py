"""Logging gaps in a sampled series: one rule for a GPU's telemetry (energy from power counts
measured spans only), the ingest's notes on a telemetry file, and a live counter's scrapes.

A step between two samples is a gap when it is longer than :data:`analytics.config.GAP_STEPS`
times the *local* sampling step: the median of the positive steps in a centred window of
:data:`GAP_WINDOW` steps. A local step, not the series' one median, so a logger that samples
every 10 s and then every 1 s (two runs appended, a changed ``-lms``) has no gap where it
slowed down, while a stopped logger still shows one (issue 27, case 42).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.config import GAP_STEPS

if TYPE_CHECKING:
    import numpy as np

#: Steps in the centred window whose median is a step's local sampling step.
GAP_WINDOW = 11


def logging_gaps(dt) -> np.ndarray:
    """Which steps ``dt`` (s, between consecutive samples of one series, time order) are
    logging gaps (bool array, same shape as ``dt``). Two samples (one step) never make a gap:
    there is no sampling step to judge by; zero steps (a repeated time) are not steps."""
    import numpy as np  # here, like pandas: a trace ingest never judges gaps

    dt = np.asarray(dt, float)
    pos = dt > 0
    if dt.size < 2 or not pos.any():
        return np.zeros(dt.shape, dtype=bool)
    import pandas as pd

    local = pd.Series(np.where(pos, dt, np.nan)).rolling(
        GAP_WINDOW, center=True, min_periods=1).median().to_numpy()
    local = np.where(np.isnan(local), float(np.median(dt[pos])), local)
    return dt > GAP_STEPS * local
