"""The envelope's disk cache beside the store (issue 15): a hit gives the same numbers without
fitting; a changed parameter, grid or code version misses."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import shared

from analytics import store
from analytics.envelope import pipeline
from analytics.ingest import files as ingest
from analytics.services import demand, envelope_cache

DATASET = "burstgpt1_week1_per_minute_tps"


@pytest.fixture
def week_store(con):
    path = shared(f"burstgpt/derived/{DATASET}.csv")
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    return con


@pytest.fixture
def week_result(week_envelope):
    """The session's real envelope of the week (conftest; n_boot 100): no fit of this module."""
    return week_envelope


@pytest.fixture
def fits(monkeypatch, week_result):
    """Stands in for :func:`run_envelope` (each call of which fits every model): records the
    params of each call and returns the module's real result."""
    calls = []

    def counted(grid, bin_s, params=None):
        calls.append(params)
        return week_result

    monkeypatch.setattr(pipeline, "run_envelope", counted)
    return calls


def _same(a: pipeline.EnvelopeResult, b: pipeline.EnvelopeResult) -> None:
    for name in envelope_cache.FRAMES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    assert a.mae_gain == b.mae_gain and a.split == b.split and a.params == b.params
    for k, v in a.alarm.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(v, b.alarm[k])
            assert v.dtype == b.alarm[k].dtype
        else:
            assert (v, type(v)) == (b.alarm[k], type(b.alarm[k]))
    assert pipeline.to_json(a) == pipeline.to_json(b)


def test_hit_is_identical_and_does_not_refit(week_store, fits, monkeypatch):
    req = demand.GridRequest(DATASET, 300)
    params = pipeline.EnvelopeParams(n_boot=100)
    g = demand.grid(week_store, req)
    first, c1 = demand.envelope_of_grid(week_store, g, 300, params)
    again, c2 = demand.envelope_of_grid(week_store, demand.grid(week_store, req), 300, params)
    assert (c1, c2, fits) == ("miss", "hit", [params])
    _same(first, again)
    _same(first, demand.envelope(week_store, req, params))  # the pages' service: a hit too
    assert demand.envelope_document(week_store, req, params)["cache"] == "hit"
    assert len(fits) == 1

    changed = pipeline.EnvelopeParams(n_boot=100, alpha=0.2)
    assert demand.envelope_of_grid(week_store, g, 300, changed)[1] == "miss"
    assert demand.envelope_of_grid(week_store, g, 300, changed)[1] == "hit"
    other = g.copy()
    other.loc[100, "target"] += 1.0  # the data changed: another data version of this grid
    assert demand.envelope_of_grid(week_store, other, 300, params)[1] == "miss"
    assert demand.envelope_of_grid(week_store, g, 600, params)[1] == "miss"
    monkeypatch.setattr(envelope_cache, "code_version", lambda: "another release")
    assert demand.envelope_of_grid(week_store, g, 300, params)[1] == "miss"
    assert len(fits) == 5


def test_unreadable_entry_misses_and_no_cache_without_a_file(week_store, fits, monkeypatch,
                                                             tmp_path):
    g = demand.grid(week_store, demand.GridRequest(DATASET, 300))
    params = pipeline.EnvelopeParams(n_boot=100)
    assert demand.envelope_of_grid(week_store, g, 300, params)[1] == "miss"
    folder = envelope_cache.folder_for(store.db_path(week_store))
    assert folder == tmp_path / "test-cache" / "envelope"  # Settings.cache_dir, with the advisor's
    (entry,) = [p for p in folder.iterdir() if not p.name.startswith(".")]
    (entry / "test.parquet").unlink()
    assert demand.envelope_of_grid(week_store, g, 300, params)[1] == "miss"  # rewritten
    assert demand.envelope_of_grid(week_store, g, 300, params)[1] == "hit"
    monkeypatch.setenv("HEADROOM_ENVELOPE_CACHE", "off")
    assert demand.envelope_of_grid(week_store, g, 300, params)[1] == "off"
    monkeypatch.delenv("HEADROOM_ENVELOPE_CACHE")
    mem = store.connect(":memory:")
    assert store.db_path(mem) is None
    assert demand.envelope_of_grid(mem, g, 300, params)[1] == "off"
    mem.close()
    assert len(fits) == 4


def test_key_covers_the_residual_stream_code():
    """Issue 18 item 9: the key hashes the bytes of every module of the envelope package, so a
    change to the residual stream (online.py, pipeline.py) or to the repairs is a miss."""
    hashed = {p.name for p in envelope_cache.code_files()}
    assert {"online.py", "pipeline.py", "repair.py", "envelope_cache.py"} <= hashed
