"""An engine's own ``/metrics`` scraped without a Prometheus (issue 29 item 1, and the live
part of "Real parts in tests"): an exporter written with ``prometheus_client`` (vLLM's metric
names, served over HTTP) replays the BurstGPT week's last days on the test's clock; headroom's
``follow`` scrapes it every 15 s of that clock. The bins equal the trace's; the exporter's
restart (its counters from 0) changes no bin; a x3 surge from a known bin raises the alarm at
its 4th bin and not before; a scrape that fails is retried and its bins are gaps, said."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from harness import http_server
from livedata import HISTORY, MODEL, week_grids

from analytics.live.follow import LiveConfig
from analytics.live.scrape import ScrapeSource
from analytics.services import live as live_service


class Engine:
    """The exporter's state on the test's clock: the tokens of each of the week's minutes,
    counted 1 s into the minute (a scrape sees them in the minute's own bin), x3 from
    ``surge_s``, counted from 0 again after ``restart_s`` (a restart)."""

    def __init__(self, minutes: pd.DataFrame, surge_s: float, restart_s: float):
        start = ((pd.to_datetime(minutes["ts"]) - pd.Timestamp(0))
                 / pd.Timedelta(seconds=1)).to_numpy()
        self.m_end = start + 1  # when a minute's tokens show in the counter
        tokens = minutes["target"].to_numpy(float)
        self.cum = np.concatenate([[0.0], np.cumsum(
            np.where(start >= surge_s, 3 * tokens, tokens))])
        self.restart_s, self.now, self.down = restart_s, 0.0, False

    def tokens(self) -> float:
        done = self.cum[np.searchsorted(self.m_end, self.now, side="right")]
        if self.now >= self.restart_s:
            done -= self.cum[np.searchsorted(self.m_end, self.restart_s, side="right")]
        return float(done)


def _exposition(engine: Engine):
    """``http_server``'s answer: the engine's counters in the text format written by
    ``prometheus_client`` (a custom collector on the test's clock), or 503 while it is down."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily

    class Collector:
        def collect(self):
            for name, value in (("vllm:prompt_tokens", engine.tokens()),
                                ("vllm:generation_tokens", 0.0)):
                fam = CounterMetricFamily(name, "tokens", labels=["model_name"])
                fam.add_metric([MODEL], value)
                yield fam

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return lambda path: ((503, b"down", "text/plain") if engine.down
                         else (200, generate_latest(registry), "text/plain; version=0.0.4"))


def _live_part(live_week, tmp_path):
    """A copy of the live week's store, its minutes and 5-minute grid, and the live part's
    start: 08:00 of the week's 6th day (the history: every bin before it), as a time and in
    UNIX seconds."""
    db = tmp_path / "s.duckdb"
    db.write_bytes(live_week[0].read_bytes())
    minutes, grid = week_grids(db)
    grid["ts"] = pd.to_datetime(grid["ts"])
    split = grid["ts"].iloc[0] + pd.Timedelta(days=5, hours=8)
    return db, minutes, grid, split, (split - pd.Timestamp(0)).total_seconds()


def test_scraped_engine_bins_equal_the_trace_through_a_restart_and_a_surge(live_week,
                                                                          tmp_path):
    db, minutes, grid, split, t0 = _live_part(live_week, tmp_path)  # live: 08:00-11:30
    # the restart half a second into a bin, before its first minute's tokens show (tokens the
    # old process counted after its last scrape are lost to any scraper: none here)
    surge_s, restart_s = t0 + 3 * 3600, t0 + 1800.5
    engine = Engine(minutes, surge_s, restart_s)
    with http_server(_exposition(engine)) as url:
        engine.now = t0 - 30
        source = ScrapeSource(f"{url}/metrics", clock=lambda: engine.now)
        f = live_service.follower(db, source, LiveConfig(MODEL, HISTORY, refit_every_s=0,
                                                         refit_on_alarm=False), "scraped", split,
                                  clock=lambda: engine.now)
        events, gone = [], {"from": float("inf")}

        def sleep(s):  # the test's clock: time passes only when the follower waits
            engine.now += s
            # the engine does not answer for two minutes in the second hour, and for good
            # from ``gone`` on
            engine.down = t0 + 5400 <= engine.now < t0 + 5520 or engine.now >= gone["from"]

        until = split + pd.Timedelta(hours=3, minutes=30)
        rows = list(live_service.follow(f, until, clock=lambda: engine.now, sleep=sleep,
                                        on_event=events.append))
        # break-it review: an engine down for good skipped the poll, so --to was never reached
        # and no bin closed; now the run ends at --to, its bins gaps past the grace
        gone["from"] = engine.now + 300
        later = until + pd.Timedelta(minutes=40)
        down = []
        tail = list(live_service.follow(f, later, clock=lambda: engine.now, sleep=sleep,
                                        on_event=down.append))
    assert len(tail) == 8 and tail[-1]["ts"] == (later - pd.Timedelta(minutes=5)).isoformat()
    assert all(r["demand"] is None and r["gap_reason"] for r in tail[2:])
    assert down and all("HTTP 503" in e["error"] for e in down)
    assert engine.now < (later - pd.Timestamp(0)).total_seconds() + 600  # no endless wait
    assert len(rows) == 42 and rows[0]["ts"] == split.isoformat()
    live = grid[(grid["ts"] >= split) & (grid["ts"] < until)]
    surged = live["ts"] >= pd.Timestamp(surge_s, unit="s")
    want = live["target"].to_numpy() * np.where(surged, 3, 1)
    got = np.array([np.nan if r["demand"] is None else r["demand"] for r in rows])
    gaps = [i for i, r in enumerate(rows) if r["demand"] is None]
    # the engine down for 2 minutes (HTTP 503) from 01:30 of the live part: the step over
    # it cannot be placed in time, so the two bins it touches are gaps, said; no other
    assert gaps == [17, 18] and all("a scrape gap" in rows[i]["gap_reason"] for i in gaps)
    assert np.allclose(got[~np.isnan(got)], want[~np.isnan(got)])  # token for token
    assert sum(r["resets"] for r in rows) == 1  # the exporter's restart, in one bin
    assert rows[6]["resets"] == 1 and rows[6]["demand"] == pytest.approx(want[6])
    assert events and all("HTTP 503" in e["error"] for e in events)
    first = int(np.argmax(surged.to_numpy()))
    alarms = [i for i, r in enumerate(rows) if r["alarm"]]
    assert alarms and alarms[0] == first + 3 and not any(r["alarm"] for r in rows[:first + 3])
