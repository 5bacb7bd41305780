"""Shared fixtures: where the staged real data is, a fresh store per test, AppTest set-up, and a
Streamlit server for the browser tests. The helpers behind them live in ``harness.py``."""

from __future__ import annotations

import pytest
from harness import REPO, SHARED_DATA, seed, shared, streamlit_server

__all__ = ["REPO", "SHARED_DATA", "shared"]  # re-exported: tests do ``from conftest import shared``


@pytest.fixture
def con(tmp_path):
    from analytics import store

    c = store.connect(tmp_path / "test.duckdb")
    yield c
    c.close()


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory):
    """One folder of fitted-model caches for the session's app stores (see :func:`share_cache`)."""
    return tmp_path_factory.mktemp("model-cache")


def share_cache(db, folder) -> None:
    """Point the store ``db``'s cache folder (``<stem>-cache``, ``Settings.cache_dir``) at the
    session's ``folder``: a page or server that fits the same envelope as an earlier test reads
    it back instead of refitting. Safe to share: envelope entries are keyed by the grid's values,
    the parameters and the code version (:mod:`analytics.services.envelope_cache`), advisor
    entries by the benchmark files' sha256 and rows and the job histories' own ledger rows
    (:func:`analytics.advisor.persist.cache_key`): stores of the same benchmark files share a
    fit.
    """
    (db.parent / f"{db.stem}-cache").symlink_to(folder, target_is_directory=True)


@pytest.fixture
def app_env(tmp_path, monkeypatch, model_cache):
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
    share_cache(db, model_cache)
    raw = tmp_path / "raw"
    raw.mkdir()
    monkeypatch.setenv("HEADROOM_DB", str(db))
    monkeypatch.setenv("HEADROOM_DATA_DIR", str(raw))
    monkeypatch.setenv("HEADROOM_DEBUG", "1")  # a page error fails the test with its traceback
    original = pages_manager.PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        pages_manager.PagesManager.uses_pages_directory = False

    monkeypatch.setattr(pages_manager.PagesManager, "__init__", init)
    shown = st.get_option("client.showErrorDetails")
    st.set_option("client.showErrorDetails", "full")  # .streamlit/config.toml redacts for users
    st.cache_data.clear()
    st.cache_resource.clear()
    yield {"db": db, "raw": raw}
    st.set_option("client.showErrorDetails", shown)
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.fixture(scope="session")
def week_grid():
    """The real BurstGPT week-1 per-minute aggregate as a 5-minute grid (a fresh copy per use)."""
    from analytics import store
    from analytics.ingest import files as ingest
    from analytics.services.demand import demand_grid

    con = store.connect(":memory:")
    path = shared("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    g = demand_grid(con, "burstgpt1_week1_per_minute_tps", "5min")
    con.close()
    return g


@pytest.fixture(scope="session")
def week_envelope(week_grid):
    """The envelope of the BurstGPT week-1 5-minute grid at the default parameters (100
    bootstrap resamples: the capacity path never reads the MAE-gain interval); fitted once per
    session and shared by the capacity tests. Treat as read-only."""
    from analytics.envelope import pipeline

    return pipeline.run_envelope(week_grid.copy(), 300, pipeline.EnvelopeParams(n_boot=100))


@pytest.fixture
def app_url(tmp_path, request, model_cache):
    """URL of a Streamlit server running ``app.py`` (through ``serve.py``) on a fresh store and
    an empty data folder.

    Parametrise it indirectly with a tuple of staged files (paths under the shared data folder)
    that the store holds before the app starts. The server log is ``tmp_path/streamlit.log``.
    """
    raw = tmp_path / "raw"
    raw.mkdir()
    db = tmp_path / "e2e.duckdb"
    share_cache(db, model_cache)
    files = getattr(request, "param", ())
    if files:
        seed(db, *files)
    with streamlit_server(db, raw, tmp_path / "streamlit.log") as url:
        yield url


#: The staged benchmark grids and Slurm history the advisor tests fit on.
ADVISOR_BENCH = ["ml_energy/leaderboard_v2/llm_text_generation_runs.csv",
                 "ml_energy/leaderboard_v3/all_task_configurations_flat.csv",
                 "llm_inference_bench_argonne/All_results.csv",
                 "llm_inference_bench_argonne/Fig_16_a_b__power_results.csv",
                 "llm_inference_bench_argonne/Fig_22__all_results_TTFT_ITL.csv",
                 "mit_supercloud/slurm-log-queueing-clean.csv"]


@pytest.fixture(scope="session")
def live_week(tmp_path_factory):
    """The live tests' week (:func:`livedata.build_week`): ``(store, OpenMetrics text, first
    live bin)``, built once; tests copy the store before writing to it."""
    from livedata import build_week

    return build_week(tmp_path_factory.mktemp("live_week"))


@pytest.fixture(scope="session")
def bench_db(tmp_path_factory):
    """A store holding :data:`ADVISOR_BENCH` (shared by the advisor tests; do not write)."""
    path = tmp_path_factory.mktemp("advisor") / "bench.duckdb"
    seed(path, *ADVISOR_BENCH)
    return path


@pytest.fixture(scope="session")
def adv(bench_db):
    """The advisor fitted once per session on :func:`bench_db` (throughput, ITL, power)."""
    from analytics import advisor, store
    from analytics.advisor import model

    con = store.connect(bench_db)
    a = advisor.build(store.bench_runs(con), store.jobs(con),
                      model.FitParams(targets=("throughput_tok_s", "itl_ms", "power_w")))
    con.close()
    return a


#: The serving runner tests' inputs: the Azure conv trace, ML.ENERGY v3 and Argonne TTFT.
SERVING_FILES = ("azure_llm/AzureLLMInferenceTrace_conv.csv",
                 "ml_energy/leaderboard_v3/all_task_configurations_flat.csv",
                 "llm_inference_bench_argonne/Fig_21__all_results_TTFT.csv")


@pytest.fixture(scope="session")
def serving_db_template(tmp_path_factory):
    """A store holding :data:`SERVING_FILES`, ingested once per session, one ingest per file
    (copy it before use)."""
    path = tmp_path_factory.mktemp("serving") / "template.duckdb"
    for rel in SERVING_FILES:
        seed(path, rel)
    return path


@pytest.fixture
def serving_db(serving_db_template, tmp_path):
    """A private copy of :func:`serving_db_template` (each test sees an empty ``sweep_runs``)."""
    import shutil
    from pathlib import Path

    return Path(shutil.copy(serving_db_template, tmp_path / "serving.duckdb"))


@pytest.fixture
def conv_inputs(serving_db):
    """(store, params, inputs) of the serving runner tests: :func:`serving_db` and the sweep
    inputs of its Azure conv trace over a 2-minute window
    (:func:`analytics.services.serving.sensitivity_inputs`)."""
    from analytics import serving, store
    from analytics.services import serving as service

    con = store.connect(serving_db)
    try:
        params = serving.ServingParams(window_s=120)
        return serving_db, params, service.sensitivity_inputs(
            con, "AzureLLMInferenceTrace_conv", params)
    finally:
        con.close()
