"""Serving metrics per live bin (issue 29 item 1): finished requests, running requests and the
end-to-end latency quantiles, read from a real Prometheus and from an engine's own /metrics.

The engine is the real BurstGPT_3 slice (400 requests, 11.5 h: arrival ``Timestamp`` and
``Elapsed time``, the end-to-end latency in s) exported as vLLM would: the finished-requests
counter, the running-requests gauge and the end-to-end latency histogram with vLLM's buckets,
scraped every 15 s, back-filled into Prometheus with ``promtool``. The trace's times are
seconds from an unstated epoch: the test places its first request at 2024-01-01 00:00 UTC."""

from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request

import numpy as np
import pandas as pd
import pytest
from harness import http_server, prometheus_server, shared

from analytics.live.follow import LiveConfig, window_frame
from analytics.live.serving_stats import histogram_quantile, serving_bins
from analytics.live.source import PrometheusSource

SLICE = "burstgpt/BurstGPT_3_slice400.csv"
MODEL = "gpt"
#: vLLM's end-to-end latency buckets (s; ``vllm/engine/metrics.py`` request_latency_buckets).
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
               60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0, math.inf)
EPOCH = pd.Timestamp("2024-01-01").timestamp()
SCRAPE_S, BIN_S = 15.0, 300


@pytest.fixture(scope="module")
def trace():
    """Arrival and completion times (UNIX s) and latencies (s) of the slice's requests."""
    raw = pd.read_csv(shared(SLICE))
    arrive = EPOCH + raw["Timestamp"].to_numpy(float) - raw["Timestamp"].iloc[0]
    latency = raw["Elapsed time"].to_numpy(float)
    return arrive, arrive + latency, latency


def _scrapes(trace):
    arrive, done, _ = trace
    return np.arange(math.floor(arrive[0] / BIN_S) * BIN_S - BIN_S,
                     math.ceil(done.max() / BIN_S) * BIN_S + 2 * BIN_S, SCRAPE_S)


def _openmetrics(trace) -> str:
    """The engine's series at every scrape, with their times, in OpenMetrics text."""
    arrive, done, latency = trace
    at = _scrapes(trace)
    lab = f'model_name="{MODEL}"'
    lines = ["# HELP vllm:request_success finished requests", "# TYPE vllm:request_success counter"]
    finished = (done[None, :] <= at[:, None])
    lines += [f'vllm:request_success_total{{finished_reason="stop",{lab}}} {n} {t:.3f}'
              for t, n in zip(at, finished.sum(axis=1), strict=True)]
    lines += ["# HELP vllm:num_requests_running running", "# TYPE vllm:num_requests_running gauge"]
    running = ((arrive[None, :] <= at[:, None]) & ~finished).sum(axis=1)
    lines += [f"vllm:num_requests_running{{{lab}}} {n} {t:.3f}"
              for t, n in zip(at, running, strict=True)]
    lines += ["# HELP vllm:e2e_request_latency_seconds e2e",
              "# TYPE vllm:e2e_request_latency_seconds histogram"]
    for le in E2E_BUCKETS:
        counts = (finished & (latency[None, :] <= le)).sum(axis=1)
        tag = "+Inf" if math.isinf(le) else repr(le)
        lines += [f'vllm:e2e_request_latency_seconds_bucket{{le="{tag}",{lab}}} {n} {t:.3f}'
                  for t, n in zip(at, counts, strict=True)]
    return "\n".join([*lines, "# EOF"]) + "\n"


def _bucket(x: float) -> int:
    return next(i for i, le in enumerate(E2E_BUCKETS) if x <= le)


def test_serving_stats_from_prometheus_equal_the_trace_and_promql(trace, tmp_path):
    arrive, done, latency = trace
    start = math.floor(arrive[0] / BIN_S) * BIN_S
    end = math.ceil(done.max() / BIN_S) * BIN_S
    config = LiveConfig(MODEL, "unused")
    with prometheus_server(tmp_path / "prom", _openmetrics(trace)) as url:
        frame = window_frame(PrometheusSource(url), config, start, end, end + 2 * BIN_S)
        sel = f'vllm:e2e_request_latency_seconds_bucket{{model_name="{MODEL}"}}'
        promql = f"histogram_quantile(0.95, sum by (le) ({sel} - {sel} offset 5m))"
        query = urllib.parse.urlencode({"query": promql, "start": start + BIN_S,
                                        "end": end, "step": BIN_S})
        with urllib.request.urlopen(f"{url}/api/v1/query_range?{query}", timeout=30) as resp:
            [result] = json.load(resp)["data"]["result"]
    n = (end - start) // BIN_S
    assert len(frame) == n
    # requests: the completions counted at the first scrape at or after each one, by its bin
    seen_at = np.ceil(done / SCRAPE_S) * SCRAPE_S
    want = np.bincount((np.ceil((seen_at - start) / BIN_S) - 1).astype(int), minlength=n)
    assert frame["requests"].tolist() == want.astype(float).tolist()
    assert frame["requests"].sum() == 400
    # running: the mean of the gauge's scrapes in (bin start, bin end]
    at = _scrapes(trace)
    running = ((arrive[None, :] <= at[:, None]) & (done[None, :] > at[:, None])).sum(axis=1)
    idx = (np.ceil((at - start) / BIN_S) - 1).astype(int)
    mean = pd.Series(running).groupby(idx).mean()
    assert frame["running_mean"].tolist() == pytest.approx([mean[b] for b in range(n)])
    # e2e p95: Prometheus' own histogram_quantile over the same bucket increases, bin for bin
    promql_at = {round(float(t)) - BIN_S: v for t, v in result["values"]}
    bins_s = (pd.to_datetime(frame["ts"]) - pd.Timestamp(0)).dt.total_seconds().round()
    compared = 0
    for t, ours in zip(bins_s, frame["e2e_p95_s"], strict=True):
        theirs = promql_at.get(int(t))
        if pd.isna(ours):  # no request finished in the bin: unknown, as PromQL's NaN
            assert theirs is None or theirs == "NaN", (t, theirs)
            continue
        assert float(theirs) == pytest.approx(ours, rel=1e-12), t
        compared += 1
    assert compared == int((want > 0).sum()) > 50
    # and the true 95th percentile of each bin's requests lies in the bucket of the estimate
    b_of = (np.ceil((seen_at - start) / BIN_S) - 1).astype(int)
    for b in np.flatnonzero(want):
        lat = np.sort(latency[b_of == b])
        true = lat[math.ceil(0.95 * lat.size) - 1]
        assert _bucket(true) == _bucket(frame["e2e_p95_s"][b]), (b, lat, frame["e2e_p95_s"][b])
    assert frame[["waiting_mean", "kv_cache_mean", "ttft_p95_s"]].isna().all().all()


def test_a_scraped_engines_histogram_and_gauges_as_prometheus_client_writes_them(tmp_path):
    """An engine's own /metrics written by prometheus_client (the library vLLM uses), scraped
    twice: the bin's quantile is histogram_quantile of the bucket increases, the gauges' mean
    that of the two scrapes in the bin, the KV cache's mean and max over its samples."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

    from analytics.live.scrape import ScrapeSource

    reg = CollectorRegistry()
    ttft = Histogram("vllm:time_to_first_token_seconds", "TTFT", ["model_name"], registry=reg,
                     buckets=(0.1, 0.25, 0.5, 1.0))
    done = Counter("vllm:request_success", "finished", ["model_name", "finished_reason"],
                   registry=reg)
    waiting = Gauge("vllm:num_requests_waiting", "queued", ["model_name"], registry=reg)
    kv = Gauge("vllm:kv_cache_usage_perc", "KV", ["model_name"], registry=reg)
    now = {"t": 1_700_000_100.0}
    with http_server(lambda path: (200, generate_latest(reg), "text/plain")) as url:
        src = ScrapeSource(f"{url}/metrics", clock=lambda: now["t"], model=MODEL)
        waiting.labels(MODEL).set(4)
        kv.labels(MODEL).set(0.5)
        ttft.labels(MODEL), done.labels(MODEL, "stop")  # the series exist from the start
        src.scrape()  # the baseline, at the bin's start
        latencies = [0.05, 0.2, 0.3, 0.3, 0.7, 0.9]
        for x in latencies:
            ttft.labels(MODEL).observe(x)
            done.labels(MODEL, "stop").inc()
        now["t"] += 150
        waiting.labels(MODEL).set(2)
        kv.labels(MODEL).set(0.25)
        src.scrape()
        now["t"] += 150
        waiting.labels(MODEL).set(6)
        kv.labels(MODEL).set(0.75)
        src.scrape()
        series = src.serving("vllm", MODEL, now["t"] - 900, now["t"])
    frame = serving_bins(series, now["t"] - 300, now["t"], BIN_S)
    [row] = frame.to_dict("records")
    upper = np.array([0.1, 0.25, 0.5, 1.0, np.inf])
    counts = np.array([1, 2, 4, 6, 6], float)  # the six observations, cumulative
    assert row["requests"] == 6
    assert row["ttft_p50_s"] == pytest.approx(histogram_quantile(0.5, upper, counts))
    assert row["ttft_p95_s"] == pytest.approx(histogram_quantile(0.95, upper, counts))
    assert row["ttft_p50_s"] == pytest.approx(0.25 + 0.25 * (3 - 2) / 2)  # by hand: 0.375
    assert row["waiting_mean"] == 4 and row["kv_cache_mean"] == 0.5 and row["kv_cache_max"] == 0.75


def test_energy_from_the_power_gauge_where_the_gpus_have_no_energy_counter(trace, tmp_path):
    """DCGM's power gauge (W) of two GPUs, sampled every 15 s, integrated per bin by the
    trapezoid rule (item 6: power x time over measured spans); a GPU silent for ten minutes
    makes the bins it spans unknown, with the reason."""
    from harness import counter_openmetrics

    from analytics.live.source import POWER_GAUGE

    arrive, done, _ = trace
    raw = pd.read_csv(shared(SLICE))
    at = _scrapes(trace)
    tokens = np.array([raw["Total tokens"].to_numpy(float)[(done > a - SCRAPE_S) & (done <= a)]
                       .sum() for a in at])
    watts = 100.0 + 0.25 * tokens / SCRAPE_S  # a 100 W floor and 0.25 J per token
    silent = (at > at[200]) & (at < at[200] + 600)  # GPU 1 stops answering for 10 minutes
    text = counter_openmetrics({("vllm:prompt_tokens", MODEL): (at, np.cumsum(tokens))})
    gauge = [f"# HELP {POWER_GAUGE} W", f"# TYPE {POWER_GAUGE} gauge"]
    for g in (0, 1):
        keep = ~silent if g == 1 else np.ones(at.size, bool)
        gauge += [f'{POWER_GAUGE}{{Hostname="n1",gpu="{g}"}} {w:.17g} {t:.3f}'
                  for t, w in zip(at[keep], watts[keep], strict=True)]
    text = text.replace("# EOF\n", "\n".join(gauge) + "\n# EOF\n")
    start = math.floor(arrive[0] / BIN_S) * BIN_S
    end = math.ceil(done.max() / BIN_S) * BIN_S
    config = LiveConfig(MODEL, "unused", energy_selector='Hostname="n1"')
    with prometheus_server(tmp_path / "prom", text) as url:
        frame = window_frame(PrometheusSource(url), config, start, end, end + 2 * BIN_S)
    assert set(frame["energy_basis"]) == {f"{POWER_GAUGE} x time"}
    lost = 0
    for b, row in enumerate(frame.itertuples(index=False)):
        lo = start + b * BIN_S
        inside = (at >= lo) & (at <= lo + BIN_S)  # the bin's edges are sample times
        if at[200] < lo + BIN_S and at[200] + 600 > lo:  # GPU 1's silent step crosses it
            assert pd.isna(row.energy_j) and "scrape gap" in row.energy_gap_reason
            lost += 1
            continue
        want = 2 * np.trapezoid(watts[inside], at[inside])
        assert row.energy_j == pytest.approx(want, rel=1e-12), b
    assert 2 <= lost <= 4


@pytest.mark.parametrize(("q", "counts", "want"), [
    (0.5, [0, 0, 0], None),            # no observation: unknown, not 0
    (0.5, [4, 4, 4], 0.05),            # all in the first bucket: from 0 to its bound
    (0.9, [1, 2, 10], 0.2),            # in +Inf: the highest finite bound
    (0.5, [3, 2, 6], 0.1 * 3 / 3),     # a bucket below its neighbour is lifted (monotonic)
])
def test_histogram_quantile_follows_prometheus(q, counts, want):
    got = histogram_quantile(q, np.array([0.1, 0.2, np.inf]), np.array(counts, float))
    assert got == (None if want is None else pytest.approx(want))


def test_bad_buckets_and_gauge_samples_leave_the_demand_measured():
    """Break-it review: a bucket labelled ``le="NaN"`` crashed the run (KeyError nan); a NaN
    sample of a serving gauge refused the whole window, demand included; two values at one
    time in a Prometheus answer read as a counter reset (12,359,806 tokens for 6,090)."""
    import numpy as np

    from analytics.live import source as src
    from analytics.live.serving_stats import serving_bins
    from analytics.live.source import Series, SourceError

    t0 = 1_700_000_100.0  # a bin start (a multiple of 300 s)
    t = np.array([t0 - 1, t0 + 150, t0 + 301])  # samples either side of the bin

    def bucket(le, counts):
        return Series("vllm:time_to_first_token_seconds_bucket", "ttft",
                      (("le", le), ("model_name", "m")), t, np.array(counts, float))
    clean = [bucket("0.1", [0, 2, 5]), bucket("1.0", [0, 6, 10]), bucket("+Inf", [0, 6, 10])]
    want = serving_bins(clean, t0, t0 + 300, 300)["ttft_p95_s"].tolist()
    assert want[0] is not None and 0.1 < want[0] <= 1.0
    for bad in ([bucket("NaN", [0, 1, 3])] + clean, clean + [bucket("NaN", [0, 1, 3])]):
        assert serving_bins(bad, t0, t0 + 300, 300)["ttft_p95_s"].tolist() == want

    class Answer(src.PrometheusSource):
        def __init__(self, values):
            super().__init__("http://127.0.0.1:9")
            self.values = values

        def _get(self, path, params):
            return {"resultType": "matrix", "result": [
                {"metric": {"__name__": "vllm:num_requests_running", "model_name": "m"},
                 "values": self.values}]}
    gauge = Answer([[100, "3"], [200, "NaN"], [250, "-1"], [290, "5"]])
    got = gauge.serving("vllm", "m", 0, 300)
    assert [s.values.tolist() for s in got] == [[3.0, 5.0]]  # the bad samples dropped
    with pytest.raises(SourceError, match="two values at time 200.000"):
        Answer([[100, "3"], [200, "7"], [200, "1000000"]]).counters("vllm", "m", 0, 300)
    with pytest.raises(SourceError, match="not a finite number >= 0"):  # a counter: refused
        Answer([[100, "NaN"]]).read({"vllm:num_requests_running": "prompt"}, 'a="b"', 0, 300)


def test_power_samples_out_of_order_repeated_or_absurd_are_unknown_with_a_reason():
    import numpy as np

    from analytics.live.bins import power_energy_bins
    from analytics.live.source import Series

    def power(ts, w):
        return [Series("DCGM_FI_DEV_POWER_USAGE", "prompt", (("gpu", "0"),),
                       np.array(ts, float), np.array(w, float))]
    ok, why = power_energy_bins(power([0, 150, 300], [100, 300, 100]), 0, 300, 300)
    assert ok.tolist() == [60000.0] and why == [None]
    for ts, w, says in (([0, 300, 150], [100, 100, 300], "not strictly increasing"),
                        ([0, 150, 150, 300], [100, 100, 9e6, 100], "not strictly increasing"),
                        ([0, 150, 300], [100, 1e308, 100], "finite number of watts")):
        e, why = power_energy_bins(power(ts, w), 0, 300, 300)
        assert np.isnan(e).all() and says in why[0], (ts, why)
