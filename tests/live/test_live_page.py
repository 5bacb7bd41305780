"""The Live page (issue 29 item 7): a stored run's newest bins, coverage so far and alarm,
through AppTest; and in real headless Chromium a new bin, stored by the follower while the
page is open, arrives without a reload (the page's fragment refreshes it)."""

from __future__ import annotations

import pandas as pd
import pytest
from harness import (
    ARTIFACTS,
    browser_page,
    close_browsers,
    metrics,
    new_app,
    prometheus_server,
    read_metric,
    streamlit_server,
    wait_metrics_change,
)
from livedata import GPUS, HISTORY, MODEL
from livedata import epoch as _s
from livedata import soon as _soon

from analytics.live.follow import LiveConfig
from analytics.services import live as live_service


@pytest.fixture(scope="module", autouse=True)
def _stop_chromium():
    """Stop the shared Chromium after this module (as tests/e2e's conftest does): Playwright's
    sync API keeps an event loop on the main thread, which would refuse later tests'
    ``asyncio.run`` (a Dask handshake in tests/sweep did)."""
    yield
    close_browsers()


def _followed(live_week, tmp_path, url):
    db0, _, split = live_week
    db = tmp_path / "s.duckdb"
    db.write_bytes(db0.read_bytes())
    f = live_service.follower(db, url, LiveConfig(MODEL, HISTORY, energy_selector=GPUS),
                              "fleet", split, clock=_soon(split))
    return db, f, split, f.poll(_s(split + pd.Timedelta(hours=2)) + 30)


def test_live_page_shows_the_stored_run(live_week, tmp_path, monkeypatch, app_env):
    with prometheus_server(tmp_path / "prom", live_week[1]) as url:
        db, _, _, records = _followed(live_week, tmp_path, url)
    monkeypatch.setenv("HEADROOM_DB", str(db))
    at = new_app().run()
    at.switch_page("pages/live.py").run()
    assert not at.exception
    shown = metrics(at)
    assert shown["bins closed"] == "24"
    assert shown["coverage so far"] == f"{records[-1]['coverage_so_far']:.1%}"
    assert shown["newest demand"] == f"{records[-1]['demand']:,.0f}"
    assert shown["J/token"] == f"{records[-1]['j_per_token']:.3g}"
    assert not at.error  # no alarm on the week's quiet hours
    assert at.get("plotly_chart")
    # the run's series is a dataset, named on the page, and the Demand page reads it
    from analytics.ui.widgets import plain

    said = f"appended to dataset {plain('live-fleet')} as it closes"
    assert any(said in c.value for c in at.caption), [c.value for c in at.caption]
    # the week's engine exports tokens only: no serving row; a bin whose engine exposes
    # serving metrics (finished requests, TTFT / ITL / e2e p95, queue, KV cache) shows them
    assert "TTFT p95" not in shown
    from analytics import store

    served = {"requests": 41.0, "ttft_p95_s": 0.2375, "itl_p95_s": 0.031, "e2e_p95_s": 12.5,
              "waiting_mean": 3.5, "kv_cache_mean": 0.42}
    nxt = {**records[-1], **served,
           "ts": (pd.Timestamp(records[-1]["ts"]) + pd.Timedelta(minutes=5)).isoformat()}
    con = store.connect(db)
    try:
        assert store.save_live_bins(con, "fleet", [nxt]) == 1
        stored = store.live_bins(con, "fleet", limit=1).iloc[0]
    finally:
        con.close()
    assert {k: stored[k] for k in served} == served  # stored as the follower gave them
    at.run()
    shown = metrics(at)
    assert (shown["TTFT p95"], shown["ITL p95"], shown["e2e p95"]) == ("238 ms", "31 ms",
                                                                        "12.5 s")
    assert (shown["requests finished"], shown["queued"], shown["KV cache"]) == ("41", "3.5",
                                                                               "42%")
    at.switch_page("pages/demand.py").run()
    pick = next(s for s in at.selectbox if "live-fleet" in s.options)
    pick.select("live-fleet").run()
    assert not at.exception and at.get("plotly_chart")


@pytest.mark.browser
def test_a_new_bin_arrives_on_the_open_page_without_a_reload(live_week, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    with prometheus_server(tmp_path / "prom", live_week[1]) as url:
        db, f, split, _ = _followed(live_week, tmp_path, url)
        with streamlit_server(db, raw, tmp_path / "streamlit.log",
                              env={"HEADROOM_LIVE_REFRESH_S": "1"}) as app, \
                browser_page() as (_, page):
            page.goto(f"{app}/live")
            page.get_by_text("bins closed").first.wait_for()
            before = {"bins closed": read_metric(page, "bins closed")}
            assert before == {"bins closed": "24"}
            navigations = []
            page.on("framenavigated", lambda frame: navigations.append(frame.url))
            assert len(f.poll(_s(split + pd.Timedelta(hours=2, minutes=5)) + 30)) == 1
            wait_metrics_change(page, before)
            assert read_metric(page, "bins closed") == "25"
            assert navigations == []  # no reload: the fragment brought the bin
            page.screenshot(path=str(ARTIFACTS / "live.png"), full_page=True)
