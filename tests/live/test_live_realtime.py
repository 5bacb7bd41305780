"""A real Prometheus scraping an engine's exporter in real time (issue 29, "Live"): the exporter
(``prometheus_client``, vLLM's counter name) replays the real BurstGPT head400 requests at an
accelerated clock, Prometheus scrapes it every second and stamps the samples with the wall
clock, and headroom reads the bins back from Prometheus as the follower does
(:func:`analytics.live.follow.window_frame`) on 2-second bins.

Mid-run the exporter restarts (its counter starts again from 0) and Prometheus is stopped and
started again on the same TSDB (it scrapes again some seconds later, once it has replayed its
write-ahead log). Every bin of the window is there; exactly the bins the outage's long step
between two stored samples touches are unknown, with the reason, and every other bin holds
exactly the tokens the exporter added between the scrapes it spans (increments are placed half
a scrape interval away from Prometheus' scrape phase, so no increment races a scrape); the
restart changes no total.

The replay lasts about 35 s of wall clock (the real trace's 10.4 h compressed), most of it
waiting on the clock, not CPU."""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.parse
import urllib.request

import numpy as np
import pandas as pd
from harness import free_port, http_server, prometheus_server, shared

from analytics.live.follow import LiveConfig, window_frame
from analytics.live.source import PrometheusSource

MODEL = "llama"
BIN_S = 2
SLOTS = 32          # seconds of replay (one slot per wall second)
RESTART_AT = 8      # the exporter restarts before this slot's increment
STOP_AT = 12        # Prometheus is stopped before this slot, and started again at once


def _slot_tokens() -> np.ndarray:
    """Tokens per replay slot: the real requests' Total tokens, their Timestamps compressed
    onto :data:`SLOTS` one-second slots."""
    raw = pd.read_csv(shared("burstgpt/BurstGPT_1_head400.csv"))
    t = raw["Timestamp"].to_numpy(float)
    slot = np.minimum(((t - t[0]) / (t[-1] - t[0] + 1e-9) * SLOTS).astype(int), SLOTS - 1)
    return np.bincount(slot, weights=raw["Total tokens"].to_numpy(float), minlength=SLOTS)


def _last_sample(url: str) -> float | None:
    q = urllib.parse.urlencode({"query": f'vllm:prompt_tokens_total{{model_name="{MODEL}"}}[10s]'})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as resp:
            result = json.load(resp)["data"]["result"]
    except OSError:
        return None
    return float(result[0]["values"][-1][0]) if result and result[0]["values"] else None


def _wait_for(check, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError("Prometheus did not scrape the exporter in time")


def test_bins_read_from_a_prometheus_scraping_in_real_time(tmp_path):
    from prometheus_client import CollectorRegistry, Counter, generate_latest

    tokens = _slot_tokens()

    def fresh():
        reg = CollectorRegistry()
        c = Counter("vllm:prompt_tokens", "prefill tokens", ["model_name"], registry=reg)
        c.labels(MODEL)
        return reg, c

    engine = {"reg": None, "counter": None}
    engine["reg"], engine["counter"] = fresh()
    added: list[tuple[float, float]] = []  # (wall time, tokens) of each increment
    with http_server(lambda path: (200, generate_latest(engine["reg"]), "text/plain")) as ex:
        target = ex.removeprefix("http://")
        port = free_port()
        folder = tmp_path / "prom"
        prom = prometheus_server(folder, "# EOF\n", port=port, scrape=target)
        url = prom.__enter__()
        try:
            first = _wait_for(lambda: _last_sample(url), 30)
            start_s = math.ceil((first + 0.01) / BIN_S) * BIN_S  # the series exists before
            clock = {"phase": first % 1.0}  # Prometheus' scrape phase (s past the second)
            go = threading.Event()
            go.set()

            def at_half_phase(t: float) -> float:
                """The first time >= t half a scrape interval past a scrape."""
                return t + (clock["phase"] + 0.5 - t) % 1.0

            def replay():
                t = at_half_phase(max(start_s, time.time() + 0.2))
                for k in range(SLOTS):
                    go.wait()
                    t = at_half_phase(max(t, time.time() + 0.2))
                    time.sleep(max(t - time.time(), 0))
                    if k == RESTART_AT:  # the engine restarts: a new counter from 0
                        engine["reg"], engine["counter"] = fresh()
                    engine["counter"].labels(MODEL).inc(float(tokens[k]))
                    added.append((time.time(), float(tokens[k])))
                    t += 1.0

            player = threading.Thread(target=replay, daemon=True)
            player.start()
            _wait_for(lambda: len(added) >= STOP_AT, 60)
            go.clear()  # the replay waits while Prometheus is down and its phase unknown
            prom.__exit__(None, None, None)  # Prometheus stops
            prom = None
            prom = prometheus_server(folder, None, port=port, scrape=target)  # same TSDB
            url = prom.__enter__()
            back = time.time()
            later = _wait_for(lambda: (s := _last_sample(url)) is not None and s > back + 1
                              and s, 30)  # a second scrape after the restart: its phase
            clock["phase"] = later % 1.0
            go.set()
            player.join(timeout=SLOTS + 10)
            end_wall = added[-1][0] + 2 * BIN_S
            _wait_for(lambda: (s := _last_sample(url)) is not None and s > end_wall, 30)
            end_s = math.floor(end_wall / BIN_S) * BIN_S
            source = PrometheusSource(url)
            frame = window_frame(source, LiveConfig(MODEL, "unused", bin_s=BIN_S), start_s,
                                 end_s, end_wall + 1)
            [samples] = source.counters("vllm", MODEL, start_s - 2 * BIN_S, end_wall + 1)
        finally:
            if prom is not None:
                prom.__exit__(None, None, None)
    assert len(added) == SLOTS and sum(v for _, v in added) == tokens.sum() > 0
    n = (end_s - start_s) // BIN_S
    assert len(frame) == n  # no bin lost
    # each increment is counted at the first scrape after it (half a scrape later), in the
    # bin that holds that scrape; the outage's long step makes the bins it touches unknown
    stamps = samples.ts_s
    when = np.array([w for w, _ in added])
    after = stamps[np.searchsorted(stamps, when, side="right")]
    where = (np.ceil((after - start_s) / BIN_S) - 1).astype(int)
    want = np.bincount(where, weights=[v for _, v in added], minlength=n)
    step = int(np.argmax(np.diff(stamps)))  # the outage: the one long step between scrapes
    down_from, down_to = stamps[step], stamps[step + 1]
    assert down_to - down_from > 3 and np.sort(np.diff(stamps))[-2] < 1.5
    outside = (when < down_from) | (when > down_to)
    assert np.abs(after - when - 0.5)[outside].max() < 0.4  # no increment raced a scrape
    gaps = frame["gap"].to_numpy()
    lo = start_s + BIN_S * np.arange(n)
    touched = (lo < down_to) & (lo + BIN_S > down_from)
    assert gaps.tolist() == touched.tolist(), frame[["ts", "gap_reason"]]
    assert all("scrape gap" in r or "no sample" in r for r in frame.loc[gaps, "gap_reason"])
    assert frame.loc[~gaps, "target"].tolist() == want[~gaps].tolist()
    assert (~gaps[lo > down_to]).sum() >= 3  # bins after Prometheus came back are known
    # the exporter's restart (before slot 8) lands in a known bin: its total is unchanged
    restart_bin = where[RESTART_AT]
    assert not gaps[restart_bin] and frame["resets"].iloc[restart_bin] == 1
    assert frame["target"].iloc[restart_bin] == want[restart_bin]
