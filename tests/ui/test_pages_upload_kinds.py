"""Issue 14 items 9 and 15 on the Data page: same-named uploads both become datasets (named
from their ``Hostname``), and SGLang results take their GPU from the Parse options field."""

from __future__ import annotations

import json
import math

from conftest import SHARED_DATA
from harness import missing, new_app, table_with

CASE = SHARED_DATA.parent / "cases" / "28-duplicate-upload-names"


def test_same_named_uploads_both_ingested_under_hostname_names(app_env):
    if not CASE.exists():
        missing(CASE)
    files = [("metrics.prom", (CASE / node / "metrics.prom").read_bytes(), "text/plain")
             for node in ("node-a", "node-b")]
    at = new_app().run()
    at.file_uploader(key="uploads").set_value(files)
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    assert not at.error
    shown = [s.value for s in at.success]
    assert any("metrics-node-a" in s for s in shown)
    assert any("metrics-node-b" in s for s in shown)
    ledger = table_with(at, "name")
    assert sorted(ledger["name"]) == ["metrics-node-a", "metrics-node-b"]
    assert "--name" not in " ".join(str(e.value) for e in at.get("markdown"))


def test_sglang_upload_asks_for_the_gpu_then_takes_it_from_parse_options(app_env):
    run = {"backend": "sglang", "dataset_name": "random", "request_rate": math.inf,
           "max_concurrency": 16, "duration": 60.0, "completed": 120,
           "total_input_tokens": 122880, "total_output_tokens": 61440,
           "request_throughput": 2.0, "output_throughput": 1024.0,
           "mean_e2e_latency_ms": 8000.0, "median_e2e_latency_ms": 7900.0,
           "mean_ttft_ms": 120.0, "median_ttft_ms": 110.0, "median_itl_ms": 15.0,
           "concurrency": 15.8}
    body = (json.dumps(run) + "\n" + json.dumps(dict(run, request_rate=2.0,
                                                     max_concurrency=None)) + "\n").encode()
    at = new_app().run()
    at.file_uploader(key="uploads").set_value(("sglang.jsonl", body, "application/json"))
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    assert "SGLang results carry no hardware" in at.error[0].value
    at.text_input(key="bench_hardware").set_value("H100")
    at.button(key="ingest").click().run()
    assert not at.exception
    assert "2 rows" in at.success[0].value
    ledger = table_with(at, "name")
    assert ledger[ledger["name"] == "sglang"].iloc[0]["format"] == "sglang_bench"


def test_demand_page_says_how_many_requests_had_unknown_output(app_env):
    case = SHARED_DATA.parent / "cases" / "13-mooncake-optional-fields.jsonl"
    if not case.exists():
        missing(case)
    at = new_app().run()
    at.file_uploader(key="uploads").set_value((case.name, case.read_bytes(), "application/json"))
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    assert "4 rows" in at.success[0].value
    warnings = table_with(at, "warning")
    line3 = warnings[warnings["column"] == "output_length"].iloc[0]
    assert line3["lines"] == "3" and "NULL, not 0" in line3["warning"]
    at.switch_page("pages/demand.py").run()
    assert not at.exception
    assert any("1 request(s) in 1 bin(s)" in w.value and "lower bound" in w.value
               for w in at.warning)
