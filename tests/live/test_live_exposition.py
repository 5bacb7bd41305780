"""headroom's live envelope back out (issue 29 items 4 and 5): ``/metrics`` parses with
``prometheus_client``'s parser and carries the stored run's last bin; a real Prometheus scrapes
it, loads the generated alerting rules (``promtool check rules`` passes, every rule evaluates
with health ok), and every PromQL expression of the rules and the Grafana dashboard runs
without error against it."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request

import pandas as pd
import pytest
from harness import PROMTOOL, http_server, prometheus_server, strict_loads
from livedata import GPUS, HISTORY, MODEL, SITE
from livedata import epoch as _s
from livedata import soon as _soon

from analytics import cli, store
from analytics.live import exposition
from analytics.live.follow import LiveConfig
from analytics.services import live as live_service


@pytest.fixture(scope="module")
def followed(live_week, tmp_path_factory):
    """A store whose run ``r`` followed the week's first live hours (24 bins)."""
    db0, text, split = live_week
    folder = tmp_path_factory.mktemp("followed")
    db = folder / "s.duckdb"
    db.write_bytes(db0.read_bytes())
    with prometheus_server(folder / "prom", text) as url:
        f = live_service.follower(db, url, LiveConfig(MODEL, HISTORY, energy_selector=GPUS,
                                                      carbon_site=SITE), "r", split,
                                  clock=_soon(split))
        records = f.poll(_s(split + pd.Timedelta(hours=2)) + 30)
    return db, records


def _query(url: str, expr: str) -> dict:
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10) as resp:
        return json.loads(resp.read())


def test_metrics_parse_and_carry_the_last_bin(followed):
    from prometheus_client.parser import text_string_to_metric_families

    db, records = followed
    con = store.connect(db, read_only=True)
    try:
        text = exposition.metrics_text(con).decode()
    finally:
        con.close()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    last = records[-1]
    labels = {"run": "r", "model": MODEL, "alpha": "0.1"}
    assert last["j_per_output_token"] is None  # no completion tokens: the series is absent
    assert not fams["headroom_energy_per_output_token_joules"].samples
    from analytics.live.serving_stats import COLUMNS

    # the week's engine exports token counters only: its serving stats are unknown, absent
    assert all(last[c] is None for c in COLUMNS)
    for name, (_, field) in exposition.METRICS.items():
        if field == "j_per_output_token" or field in COLUMNS:
            assert not fams[name].samples, name
            continue
        (sample,) = fams[name].samples
        assert sample.labels == labels, name
        want = (pd.Timestamp(last["ts"]) - pd.Timestamp(0)).total_seconds() if field == "ts" \
            else float(last[field])
        assert sample.value == pytest.approx(want, rel=1e-12), name
    assert fams["headroom_live_bins"].samples[0].value == 24
    assert fams["headroom_live_runs"].samples[0].value == 1


def test_prometheus_scrapes_metrics_and_runs_every_rule_and_panel(followed, tmp_path, capsys):
    db, records = followed
    rc = cli.main(["live-config", "--out", str(tmp_path / "cfg")])
    doc = strict_loads(capsys.readouterr().out)
    assert rc == 0 and doc["rules"].endswith("headroom-alerts.yml")
    check = subprocess.run([PROMTOOL, "check", "rules", doc["rules"]], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert json.loads(open(doc["dashboard"]).read())["uid"] == "headroom-live"

    def scrape(path):
        con = store.connect(db, read_only=True)
        try:
            return 200, exposition.metrics_text(con), "text/plain; version=0.0.4"
        finally:
            con.close()

    with http_server(scrape) as exporter:
        target = exporter.removeprefix("http://")
        with prometheus_server(tmp_path / "prom", None, scrape=target,
                               rules=tmp_path / "cfg" / "headroom-alerts.yml") as url:
            deadline = time.monotonic() + 30
            while True:  # wait for a scrape and one rule evaluation, not a fixed time
                got = _query(url, "headroom_demand")["data"]["result"]
                with urllib.request.urlopen(f"{url}/api/v1/rules", timeout=10) as resp:
                    groups = json.loads(resp.read())["data"]["groups"]
                rules = [r for g in groups for r in g["rules"]]
                if got and rules and all(r.get("lastEvaluation", "").startswith("20")
                                         and not r["lastEvaluation"].startswith("0001")
                                         for r in rules):
                    break
                assert time.monotonic() < deadline, "Prometheus never scraped /metrics"
                time.sleep(0.2)
            assert float(got[0]["value"][1]) == pytest.approx(records[-1]["demand"])
            assert got[0]["metric"]["model"] == MODEL
            assert {r["name"] for r in rules} == {"HeadroomDemandAboveEnvelope",
                                                  "HeadroomCoverageBelowTarget",
                                                  "HeadroomLiveStale"}
            assert all(r["health"] == "ok" for r in rules), rules
            for expr in exposition.expressions():
                answer = _query(url, expr)
                assert answer["status"] == "success", (expr, answer)
            # the week is in the past: its last bin is stale, and the rule says so
            stale = _query(url, exposition.alert_rules()["groups"][0]["rules"][2]["expr"])
            assert stale["data"]["result"]
