"""Where the app's sweeps run: the operator's Dask cluster, shown in the sidebar, never chosen
there.

The scheduler is operator configuration (:mod:`analytics.sweep.cluster`):
``$HEADROOM_DASK_SCHEDULER`` (and ``$HEADROOM_DASK_TLS_CA`` / ``_CERT`` / ``_KEY``), else
``[dask]`` in ``.streamlit/secrets.toml``. A browser user cannot point the server at an address:
Dask unpickles what a scheduler sends, and a connection is a probe of any host:port from the
server. With none configured, sweeps run in a local process pool
(:func:`analytics.sweep.run_sweep`). :func:`backend` is what the what-ifs pass to the services.
"""

from __future__ import annotations

import logging

import streamlit as st

from analytics.sweep import Cluster, connect_client, cores, resolve_backend

log = logging.getLogger("headroom.cluster")


def _secrets() -> dict:
    """The ``[dask]`` table of the app's secrets (empty when there is no secrets file)."""
    if not st.secrets.load_if_toml_exists():  # none, or unreadable (Streamlit logs why)
        return {}
    table = st.secrets.get("dask", {})
    return dict(table) if hasattr(table, "keys") else {}


def backend() -> Cluster | None:
    """The operator's Dask cluster, or None (a local process pool)."""
    found = resolve_backend(None, _secrets())
    return found if isinstance(found, Cluster) else None


@st.cache_data(show_spinner=False, ttl=30)
def cluster_info(cluster: Cluster) -> dict:
    """``{"dashboard", "workers", "threads"}`` of the operator's scheduler (asked at most every
    30 s, the connection bounded in time), or ``{"error": message}`` when none answers."""
    try:
        client = connect_client(cluster, timeout_s=3.0)
    except ValueError as exc:
        log.warning("Dask scheduler %s: %s", cluster.address, exc)
        return {"error": "it did not answer (the server log says why)"}
    try:
        workers = client.scheduler_info()["workers"].values()
        return {"dashboard": client.dashboard_link, "workers": len(workers),
                "threads": sum(w.get("nthreads", 1) for w in workers)}
    finally:
        client.close()


def sidebar() -> None:
    """A caption saying where sweeps run: this machine's pool, or the operator's scheduler
    with its size and dashboard link (or that it does not answer). Nothing to type."""
    cluster = backend()
    with st.sidebar:
        if cluster is None:
            st.caption(f"Sweeps run on this machine ({cores()} cores). The operator can set a "
                       "Dask cluster (README, Running it for others).")
            return
        secure = "TLS" if cluster.tls else "plain TCP"
        info = cluster_info(cluster)
        if "error" in info:
            st.warning(f"Sweeps are set to run on the operator's Dask cluster ({secure}), but "
                       f"{info['error']}: they stop with an error until it answers.")
        else:
            st.caption(f"Sweeps run on the operator's Dask cluster {cluster.address} ({secure}): "
                       f"{info['workers']} worker(s), {info['threads']} thread(s), "
                       f"[Dask dashboard]({info['dashboard']})")
