"""Services: one function per question a front end asks, ``(con, request) -> result``.

The CLI (:mod:`analytics.cli`) and the Streamlit cache (:mod:`analytics.ui.cache`) both call
these and nothing else that touches data, so both front ends ask the same question the same
way, with one set of defaults. A service reads the store (through :mod:`analytics.store`, the
only module that speaks SQL) and hands plain frames to the pure analyses of the domain
packages; it never renders and never parses arguments.

Modules
-------
:mod:`~analytics.services.data`       ledger, ingest, pull, delete, export, first-run bootstrap
:mod:`~analytics.services.demand`     demand target resolution, grids, envelopes, cold start
:mod:`~analytics.services.decisions`  overbooking / GPU mix, carbon-aware dispatch, sites
:mod:`~analytics.services.advisor`    launch advisor fit, advice, backtest, provenance
:mod:`~analytics.services.serving`    energy-aware serving what-ifs (one pipeline)
:mod:`~analytics.services.power`      hybrid batch + inference power profiles
:mod:`~analytics.services.telemetry`  stored telemetry, serving windows, live NVML

Connections: every service takes an open DuckDB connection ``con`` (``store.connect``) as its
first argument; :func:`open_store` opens and closes one for a CLI command. The ingest services
also take an *opener* (a function returning such a context manager) in its place, so that a long
parse holds no lock and the store is open for writing only while rows are written
(:func:`held`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from analytics import store


@contextmanager
def held(con) -> Iterator:
    """``con`` itself when it is a connection (left open), or the connection the opener ``con()``
    yields, closed afterwards."""
    if callable(con) and not hasattr(con, "execute"):
        with con() as opened:
            yield opened
    else:
        yield con


@contextmanager
def open_store(db_path: str | Path, write: bool = False) -> Iterator:
    """Open the store at ``db_path`` for one command and close it afterwards: read-only unless
    ``write`` (so reading commands and the app can share it), waiting while another process
    holds a conflicting lock (see :func:`analytics.store.connect`).

    Raises
    ------
    store.StoreBusy
        Another process kept the store locked for the whole wait; the message names it.
    store.StoreError
        The file is not a headroom store or cannot be opened.
    """
    con = store.connect(db_path, read_only=not write)
    try:
        yield con
    finally:
        con.close()
