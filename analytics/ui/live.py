"""The Live page's reads (issue 29 item 7): the stored live runs and one run's last bins,
through :mod:`analytics.services.live`. The page never reaches Prometheus: ``headroom live
--follow`` (operator configuration: its ``--prometheus`` flag or ``$HEADROOM_PROMETHEUS_URL``)
writes the bins, the page reads them. A run's view is read again only when the store file
changed (:func:`analytics.ui.cache.store_stamp`: a stored bin moves no data version), so an
auto-refresh between bins costs a ``stat``."""

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
