"""Shared fixtures: where the staged real data is, a fresh store per test, AppTest set-up."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("HEADROOM_SHARED_DATA", REPO.parent / "shared" / "data"))


def shared(rel: str) -> Path:
    """Path of a staged real file; skips the test when the staged data is absent (CI has it)."""
    path = SHARED_DATA / rel
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"staged data missing in CI: {path}")
        pytest.skip(f"staged data not found: {path}")
    return path


@pytest.fixture
def con(tmp_path):
    from analytics import store

    c = store.connect(tmp_path / "test.duckdb")
    yield c
    c.close()


@pytest.fixture
def app_env(tmp_path, monkeypatch):
    """A fresh store and an empty data folder for the app; caches cleared; AppTest quirk fixed.

    AppTest resets ``PagesManager.uses_pages_directory`` before every run, and because this repo
    has a ``pages/`` folder (the design's layout) it then runs the *page file* alone from the
    second run on, skipping ``app.py`` (a real server clears the flag for good on the first
    ``st.navigation`` call). Clearing it after each PagesManager is built gives AppTest the real
    server's behaviour.
    """
    import streamlit as st
    from streamlit.runtime import pages_manager

    db = tmp_path / "app.duckdb"
    raw = tmp_path / "raw"
    raw.mkdir()
    monkeypatch.setenv("HEADROOM_DB", str(db))
    monkeypatch.setenv("HEADROOM_DATA_DIR", str(raw))
    original = pages_manager.PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        pages_manager.PagesManager.uses_pages_directory = False

    monkeypatch.setattr(pages_manager.PagesManager, "__init__", init)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield {"db": db, "raw": raw}
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.fixture(scope="session")
def week_grid():
    """The real BurstGPT week-1 per-minute aggregate as a 5-minute grid (a fresh copy per use)."""
    from analytics import store
    from analytics.envelope import grid
    from analytics.ingest import files as ingest

    con = store.connect(":memory:")
    path = shared("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    g = grid.demand_grid(con, "burstgpt1_week1_per_minute_tps", "5min")
    con.close()
    return g
