"""The live tests' shared inputs: the BurstGPT week 1 as an engine's counters (and two GPUs'
DCGM energy counters), served by a real Prometheus in the tests; a store holding the week and
a carbon site. Built once per test session (``conftest.live_week``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from harness import counter_openmetrics, seed

WEEK = "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"
CARBON = "green_dcc/carbon_intensity/US-CAL-CISO_2023_hourly.csv.gz"  # 2023: the week's year
SITE = "US-CAL-CISO"
#: The test's GPUs: a DCGM energy counter of 0.25 J per token over a 2 x 100 W floor.
J_PER_TOKEN, FLOOR_W, GPUS = 0.25, 100.0, 'Hostname="gpu-node-1"'
HISTORY = "burstgpt1_week1_per_minute_tps"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def week_grids(db: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The stored week's 1-minute and 5-minute grids (``ts``, ``target``, ...)."""
    from analytics import store
    from analytics.services import demand

    con = store.connect(db, read_only=True)
    try:
        return (demand.grid(con, demand.GridRequest(HISTORY, 60)),
                demand.grid(con, demand.GridRequest(HISTORY, 300)))
    finally:
        con.close()


def build_week(folder: Path):
    """(store with the week, the week's per-minute counters as OpenMetrics, the first live
    bin): the live part is the week's last two days."""
    db = folder / "s.duckdb"
    seed(db, WEEK, CARBON)
    minutes, grid = week_grids(db)
    split = pd.to_datetime(grid["ts"]).iloc[0] + pd.Timedelta(days=5)
    m_ts = ((pd.to_datetime(minutes["ts"]) - pd.Timestamp(0)) / pd.Timedelta(seconds=1)).to_numpy()
    scrapes = np.arange(m_ts[0], m_ts[-1] + 61, 60.0)
    values = np.concatenate([[0.0], np.cumsum(minutes["target"].to_numpy(float))])
    values = values[np.searchsorted(m_ts, scrapes, side="left").clip(0, len(m_ts))]
    text = counter_openmetrics({("vllm:prompt_tokens", MODEL): (scrapes, values),
                                ("vllm:generation_tokens", MODEL): (scrapes, 0 * values)})
    # two GPUs' DCGM energy counters (mJ), in the exporter's own name and labels
    energy_mj = 1e3 * (J_PER_TOKEN * values + FLOOR_W * (scrapes - scrapes[0])) / 2
    dcgm = ["# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION mJ",
            "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION gauge"]
    dcgm += [f'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{Hostname="gpu-node-1",gpu="{g}"}} '
             f"{v:.17g} {t:.3f}" for g in (0, 1) for t, v in zip(scrapes, energy_mj, strict=True)]
    text = text.replace("# EOF\n", "\n".join(dcgm) + "\n# EOF\n")
    return db, text, split


def epoch(t: pd.Timestamp) -> float:
    """``t`` (naive UTC) in UNIX seconds."""
    return (t - pd.Timestamp(0)).total_seconds()


def soon(t: pd.Timestamp):
    """A follower's clock a day after ``t`` (the week is in 2023: a follower on the real clock
    would be years behind and refuse to start)."""
    return lambda: epoch(t) + 86400
