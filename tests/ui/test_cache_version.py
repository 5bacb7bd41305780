"""The pages' cache key (issue 15): the data version is read from the store once per change of
the store file, not on every cached call, and it still follows every write."""

from __future__ import annotations

from harness import seed


def test_data_version_is_read_once_per_store_change(app_env, monkeypatch):
    from analytics import store
    from analytics.ui import cache, whatifs

    seed(app_env["db"], "burstgpt/BurstGPT_1_head400.csv")
    opened = []
    real_connect = store.connect
    monkeypatch.setattr(store, "connect", lambda *a, **k: opened.append(1) or real_connect(*a, **k))
    first = cache.data_version()
    assert cache.data_version() == first and cache.data_version() == first
    assert len(opened) == 1  # one read; the next calls cost a stat of the file
    assert whatifs.model_versions().empty and whatifs.model_versions().empty
    assert len(opened) == 2  # model versions: read once, then cached on the store stamp

    with cache.connection(write=True) as con:  # any write moves the stamp ...
        store.delete_dataset(con, "BurstGPT_1_head400")
    assert cache.data_version() == first + 1  # ... and the version is read again
    assert cache.datasets().empty
