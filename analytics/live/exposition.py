"""The live envelope back out to Prometheus and Grafana (issue 29 items 4 and 5).

:func:`metrics_text` is headroom's ``/metrics`` (served by ``serve.py``,
:mod:`analytics.ui.metrics_route`): the Prometheus text format written by ``prometheus_client``
from each stored live run's last closed bin (:mod:`analytics.store.live`). Every series is
labelled ``run``, ``model`` and ``alpha`` (the run's miscoverage, so bands of several alphas sit
apart). :func:`alert_rules` and :func:`dashboard` write a Prometheus alerting-rules file and a
Grafana dashboard over those series; :data:`METRICS` names them all once.

Energy per token (item 6) is exported for runs that name their GPUs (``--energy-selector``);
the serving stats (finished and queued requests, KV cache, latency quantiles) where the engine
exposes them.
"""

from __future__ import annotations

import json

#: Exported series: name -> (help text, the stored bin's field). The gauges carry the last
#: closed bin's values; a series is absent for a bin where its value is unknown (a gap, no GPUs named).
METRICS = {
    "headroom_demand": ("weighted tokens of the last closed bin (the envelope's target; w = "
                        "w_prompt / w_completion of the run)", "demand"),
    "headroom_envelope_point": ("one-bin-ahead point forecast of the last closed bin "
                                "(weighted tokens)", "point"),
    "headroom_envelope_lower": ("lower bound of the last closed bin's conformal band "
                                "(weighted tokens)", "lower"),
    "headroom_envelope_upper": ("upper bound of the last closed bin's conformal band "
                                "(weighted tokens)", "upper"),
    "headroom_coverage_so_far": ("share of the run's live bins with known demand inside their "
                                 "band (measured, 0-1)", "coverage_so_far"),
    "headroom_alarm": ("1 while demand has been above the band k_above bins in a row, else 0",
                       "alarm"),
    "headroom_aci_alpha_t": ("ACI's working miscoverage after the last closed bin", "alpha_t"),
    "headroom_bin_timestamp_seconds": ("start of the last closed bin (UNIX s)", "ts"),
    "headroom_energy_joules": ("energy the run's GPUs used in the last closed bin (DCGM energy "
                               "counter, J)", "energy_j"),
    "headroom_energy_per_token_joules": ("energy per token (prompt + completion) in the last "
                                         "closed bin (J)", "j_per_token"),
    "headroom_energy_per_output_token_joules": ("energy per completion token in the last "
                                                "closed bin (J)", "j_per_output_token"),
    "headroom_carbon_per_token_grams": ("operational carbon per token in the last closed bin "
                                        "(gCO2; the site's hourly carbon intensity)",
                                        "gco2_per_token"),
    "headroom_requests_finished": ("requests the engine finished in the last closed bin",
                                   "requests"),
    "headroom_requests_waiting": ("mean requests queued in the last closed bin",
                                  "waiting_mean"),
    "headroom_kv_cache_usage_ratio": ("mean KV-cache usage in the last closed bin (0-1)",
                                      "kv_cache_mean"),
    "headroom_ttft_p95_seconds": ("95th percentile time to first token of the last closed "
                                  "bin (the engine's histogram)", "ttft_p95_s"),
    "headroom_itl_p95_seconds": ("95th percentile inter-token latency (TBT) of the last closed "
                                 "bin", "itl_p95_s"),
    "headroom_e2e_latency_p95_seconds": ("95th percentile end-to-end request latency of the "
                                         "last closed bin", "e2e_p95_s"),
}
#: Per-run constants exported beside them: name -> help text.
CONSTANTS = {
    "headroom_envelope_alpha": "target miscoverage of the run's band (coverage aims at 1 - alpha)",
    "headroom_bin_seconds": "bin width of the run (s)",
    "headroom_live_bins": "bins the run has closed and stored",
}
#: The most runs one scrape reports (a bounded route): the newest ones.
MAX_RUNS = 100


def _snapshot(con) -> list[tuple[dict, dict | None]]:
    """``(run, last bin or None)`` of the newest :data:`MAX_RUNS` runs."""
    from analytics import store

    out = []
    for run in store.live_runs(con)[:MAX_RUNS]:
        last = store.live_bins(con, run["name"], limit=1)
        out.append((run, None if last.empty else last.iloc[0].to_dict()))
    return out


def metrics_text(con) -> bytes:
    """The Prometheus text exposition of the store's live runs (``prometheus_client``'s
    ``generate_latest`` over a collector of :func:`_snapshot`; see :data:`METRICS`)."""
    import pandas as pd
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    snapshot = _snapshot(con)

    class _Runs:
        def collect(self):
            labels = ["run", "model", "alpha"]
            fams = {n: GaugeMetricFamily(n, h, labels=labels)
                    for n, h in {**{k: v[0] for k, v in METRICS.items()}, **CONSTANTS}.items()}
            runs = GaugeMetricFamily("headroom_live_runs", "live runs in the store (at most "
                                     f"{MAX_RUNS} reported)", value=len(snapshot))
            for run, last in snapshot:
                cfg = run["config"]
                key = [run["name"], str(cfg["model"]), f"{float(cfg['alpha']):g}"]
                fams["headroom_envelope_alpha"].add_metric(key, float(cfg["alpha"]))
                fams["headroom_bin_seconds"].add_metric(key, float(cfg["bin_s"]))
                fams["headroom_live_bins"].add_metric(key, float(run["bins"]))
                if last is None:
                    continue
                for name, (_, field) in METRICS.items():
                    v = last.get(field)
                    if field == "ts":
                        v = (pd.Timestamp(v) - pd.Timestamp(0)).total_seconds()
                    if v is None or (isinstance(v, float) and v != v):
                        continue
                    fams[name].add_metric(key, float(v))
            yield runs
            yield from fams.values()

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Runs())
    return generate_latest(registry)


def alert_rules(stale_bins: int = 3, coverage_slack: float = 0.05,
                min_bins: int = 288) -> dict:
    """A Prometheus alerting-rules document (``rule_files``; write it with ``yaml.safe_dump``)
    over :data:`METRICS`: demand above the envelope (``headroom_alarm``), coverage so far below
    ``1 - alpha - coverage_slack`` once a run has ``min_bins`` bins, and a run whose last bin
    is older than ``stale_bins`` bins (headroom stopped, or its source)."""
    return {"groups": [{"name": "headroom-live", "rules": [
        {"alert": "HeadroomDemandAboveEnvelope", "expr": "headroom_alarm == 1",
         "labels": {"severity": "warning"},
         "annotations": {"summary": "Demand of {{ $labels.model }} is above its envelope",
                         "description": "headroom run {{ $labels.run }}: demand above the "
                                        "upper bound of the band (alpha {{ $labels.alpha }}) "
                                        "k_above bins in a row"}},
        {"alert": "HeadroomCoverageBelowTarget",
         "expr": f"headroom_coverage_so_far < (1 - headroom_envelope_alpha) - {coverage_slack:g}"
                 f" and headroom_live_bins >= {min_bins}",
         "for": "30m", "labels": {"severity": "info"},
         "annotations": {"summary": "The envelope of {{ $labels.model }} covers less than it "
                                    "should",
                         "description": "coverage so far {{ $value | humanizePercentage }}, "
                                        "below 1 - alpha: refit the envelope"}},
        {"alert": "HeadroomLiveStale",
         "expr": f"time() - headroom_bin_timestamp_seconds > {stale_bins + 1} * "
                 "headroom_bin_seconds",
         "for": "5m", "labels": {"severity": "warning"},
         "annotations": {"summary": "No new bin for {{ $labels.model }}",
                         "description": "headroom run {{ $labels.run }} has closed no bin for "
                                        f"{stale_bins} bins: is headroom live --follow running, "
                                        "and its Prometheus?"}},
    ]}]}


def dashboard() -> dict:
    """A Grafana dashboard (JSON model; import it and pick the Prometheus data source) over
    :data:`METRICS`: demand against the band, the alarm, coverage so far against 1 - alpha,
    the ACI step, energy per token, the latency quantiles and the queue and KV cache, for the
    models chosen in its ``model`` variable."""
    ds = {"type": "prometheus", "uid": "${datasource}"}
    sel = '{model=~"$model"}'

    def panel(pid, title, y, targets, unit="short", kind="timeseries"):
        return {"id": pid, "type": kind, "title": title, "datasource": ds,
                "gridPos": {"x": 0 if pid % 2 else 12, "y": y, "w": 24 if pid == 1 else 12,
                            "h": 9},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [{"refId": chr(64 + i), "datasource": ds, "expr": e,
                             "legendFormat": f}
                            for i, (e, f) in enumerate(targets, start=1)]}

    return {
        "title": "headroom: live demand envelope", "uid": "headroom-live", "editable": True,
        "schemaVersion": 39, "version": 1, "refresh": "1m", "tags": ["headroom", "llm"],
        "time": {"from": "now-24h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus",
             "label": "Prometheus"},
            {"name": "model", "type": "query", "datasource": ds, "label": "model",
             "query": "label_values(headroom_envelope_alpha, model)", "refresh": 2,
             "includeAll": True, "multi": True, "current": {"text": "All", "value": "$__all"}}]},
        "panels": [
            panel(1, "Demand against its envelope (weighted tokens per bin)", 0, [
                (f"headroom_demand{sel}", "demand {{model}}"),
                (f"headroom_envelope_point{sel}", "forecast {{model}}"),
                (f"headroom_envelope_lower{sel}", "lower {{model}} (alpha {{alpha}})"),
                (f"headroom_envelope_upper{sel}", "upper {{model}} (alpha {{alpha}})")]),
            panel(2, "Alarm: above the band k bins in a row", 9,
                  [(f"headroom_alarm{sel}", "{{model}}")]),
            panel(3, "Coverage so far against 1 - alpha", 9, [
                (f"headroom_coverage_so_far{sel}", "coverage {{model}}"),
                (f"1 - headroom_envelope_alpha{sel}", "target {{model}}")], unit="percentunit"),
            panel(5, "ACI working alpha", 18, [(f"headroom_aci_alpha_t{sel}", "{{model}}")]),
            panel(6, "Energy per token (J)", 18, [
                (f"headroom_energy_per_token_joules{sel}", "J/token {{model}}"),
                (f"headroom_energy_per_output_token_joules{sel}", "J/output token {{model}}")],
                unit="J"),
            panel(7, "Latency p95: TTFT, inter-token, end to end (s)", 27, [
                (f"headroom_ttft_p95_seconds{sel}", "TTFT {{model}}"),
                (f"headroom_itl_p95_seconds{sel}", "ITL {{model}}"),
                (f"headroom_e2e_latency_p95_seconds{sel}", "e2e {{model}}")], unit="s"),
            panel(8, "Queue and KV cache", 27, [
                (f"headroom_requests_waiting{sel}", "waiting {{model}}"),
                (f"headroom_kv_cache_usage_ratio{sel}", "KV cache {{model}}")]),
        ],
    }


def expressions() -> list[str]:
    """Every PromQL expression of :func:`alert_rules` and :func:`dashboard` (the dashboard's
    ``$model`` as ``.*``): what the tests run against a real Prometheus."""
    rules = [r["expr"] for g in alert_rules()["groups"] for r in g["rules"]]
    panels = [t["expr"].replace("$model", ".*") for p in dashboard()["panels"]
              for t in p["targets"]]
    return [*rules, *panels]


def dashboard_json() -> str:
    """:func:`dashboard` as indented JSON text."""
    return json.dumps(dashboard(), indent=2)
