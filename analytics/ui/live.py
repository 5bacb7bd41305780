"""The Live page's reads (issue 29 item 7): the stored live runs and one run's last bins,
through :mod:`analytics.services.live`. The page never reaches Prometheus: ``headroom live
--follow`` (operator configuration: its ``--prometheus`` flag or ``$HEADROOM_PROMETHEUS_URL``)
writes the bins, the page reads them. A run's view is read again only when the store file
changed (:func:`analytics.ui.cache.store_stamp`), so an auto-refresh between bins costs a
``stat``."""

from __future__ import annotations

import streamlit as st

from analytics.config import env_number
from analytics.services import live
from analytics.ui.cache import connection, settings, store_stamp

#: Seconds between the Live page's refreshes of the newest bins (a fragment, no page rerun;
#: ``$HEADROOM_LIVE_REFRESH_S``).
REFRESH_S = int(env_number("HEADROOM_LIVE_REFRESH_S", 10))


@st.cache_data(show_spinner=False, max_entries=4)
def _runs(db_path: str, stamp: tuple) -> list[dict]:
    with connection() as con:
        return live.runs(con)


def runs() -> list[dict]:
    """The stored live runs, newest first (:func:`analytics.services.live.runs`)."""
    path = settings().db_path
    return _runs(str(path), store_stamp(path))


@st.cache_data(show_spinner=False, max_entries=8)
def _view(db_path: str, stamp: tuple, name: str) -> dict:
    with connection() as con:
        return live.run_view(con, name)


def view(name: str) -> dict:
    """Run ``name``'s last bins and measured coverage (:func:`analytics.services.live.
    run_view`). Raises KeyError for a run no longer stored."""
    path = settings().db_path
    return _view(str(path), store_stamp(path), name)


def _ms(v: float) -> str:
    return f"{v * 1e3:,.0f} ms" if v < 10 else f"{v:,.1f} s"


#: The serving stats the page shows: field -> (label, format, help).
_SERVING = {
    "ttft_p95_s": ("TTFT p95", _ms, "95th percentile time to first token of the newest bin "
                   "(the engine's histogram)"),
    "itl_p95_s": ("ITL p95", _ms, "95th percentile inter-token latency (TBT) of the newest bin"),
    "e2e_p95_s": ("e2e p95", _ms, "95th percentile end-to-end request latency of the newest "
                  "bin"),
    "requests": ("requests finished", lambda v: f"{v:,.0f}", "requests the engine finished in "
                 "the newest bin"),
    "waiting_mean": ("queued", lambda v: f"{v:,.1f}", "mean requests waiting in the newest bin"),
    "kv_cache_mean": ("KV cache", lambda v: f"{v:.0%}", "mean KV-cache usage in the newest bin"),
}


def serving_row(last: dict) -> list[tuple[str, str, str]]:
    """``(label, shown value, help)`` of each serving stat the newest bin ``last`` knows
    (:data:`analytics.live.serving_stats.COLUMNS`), in :data:`_SERVING`'s order; empty when the
    engine exposes none."""
    import math

    out = []
    for field, (label, fmt, why) in _SERVING.items():
        v = last.get(field)
        if v is not None and isinstance(v, (int, float)) and math.isfinite(v):
            out.append((label, fmt(float(v)), why))
    return out
