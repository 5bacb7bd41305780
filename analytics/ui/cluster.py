"""Where the app's sweeps run (issue 17): a sidebar field naming a Dask scheduler for the
session, and the dashboard link once it answers.

Empty field (the default, unless ``$HEADROOM_DASK_SCHEDULER`` is set): sweeps run in a local
process pool (:func:`analytics.sweep.run_sweep`). The address is kept in
``st.session_state["dask_scheduler"]``; :func:`backend` is what the what-ifs pass to the
services.
"""

from __future__ import annotations

import os

import streamlit as st

from analytics.sweep import ENV_SCHEDULER, connect_client, resolve_backend

KEY = "dask_scheduler"


def backend() -> str | None:
    """The session's Dask scheduler address, or None (local)."""
    value = st.session_state.get(KEY)
    return resolve_backend(value) if value is not None else resolve_backend()


@st.cache_data(show_spinner=False, ttl=30)
def cluster_info(address: str) -> dict:
    """``{"dashboard", "workers", "threads"}`` of the scheduler at ``address`` (asked at most
    every 30 s), or ``{"error": message}`` when none answers."""
    try:
        client = connect_client(address, timeout_s=3.0)
    except ValueError as exc:
        return {"error": str(exc)}
    try:
        workers = client.scheduler_info()["workers"].values()
        return {"dashboard": client.dashboard_link, "workers": len(workers),
                "threads": sum(w.get("nthreads", 1) for w in workers)}
    finally:
        client.close()


def sidebar() -> None:
    """The sidebar's "Dask scheduler" field and, when set, the cluster's size and dashboard
    link (or why it cannot be reached)."""
    st.session_state.setdefault(KEY, os.environ.get(ENV_SCHEDULER, ""))
    with st.sidebar:
        st.text_input("Dask scheduler", key=KEY, placeholder="tcp://HOST:8786",
                      help="Run sweeps on this Dask cluster (`dask scheduler`, then `dask worker "
                           "tcp://HOST:8786` on each machine). Empty: a process pool on this "
                           f"machine. Default from ${ENV_SCHEDULER}.")
        address = backend()
        if not address:
            return
        info = cluster_info(address)
        if "error" in info:
            st.warning(f"Sweeps stop with an error until this scheduler answers (clear the field "
                       f"to run them on this machine): {info['error']}")
        else:
            st.caption(f"{info['workers']} worker(s), {info['threads']} thread(s): "
                       f"[Dask dashboard]({info['dashboard']})")
