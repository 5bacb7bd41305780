"""Issue 14 item 9: SGLang ``bench_serving --output-file x.jsonl`` (one JSON object appended per
run) is ingested run by run with the hardware given at ingest, or refused saying exactly that;
a JSON Lines file is never "invalid JSON: Extra data" (vLLM results appended into one file too).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from conftest import REPO, SHARED_DATA
from harness import missing

from analytics import store
from analytics.config import ParseOptions
from analytics.ingest import files as ingest
from analytics.ingest.formats import FormatError, parse_file

CASES = SHARED_DATA.parent / "cases"

#: One SGLang run as bench_serving.py writes it (its result dict; keys as in SGLang's source).
RUN = {"backend": "sglang", "dataset_name": "random", "request_rate": math.inf,
       "max_concurrency": 64, "sharegpt_output_len": None, "random_input_len": 1024,
       "random_output_len": 512, "random_range_ratio": 0.0, "duration": 120.0, "completed": 300,
       "total_input_tokens": 307200, "total_output_tokens": 153600,
       "total_output_tokens_retokenized": 153500, "request_throughput": 2.5,
       "input_throughput": 2560.0, "output_throughput": 1280.0, "mean_e2e_latency_ms": 25000.0,
       "median_e2e_latency_ms": 24000.0, "std_e2e_latency_ms": 100.0,
       "p99_e2e_latency_ms": 30000.0, "mean_ttft_ms": 300.0, "median_ttft_ms": 250.0,
       "std_ttft_ms": 10.0, "p99_ttft_ms": 900.0, "mean_tpot_ms": 24.0, "median_tpot_ms": 23.5,
       "std_tpot_ms": 1.0, "p99_tpot_ms": 40.0, "mean_itl_ms": 24.0, "median_itl_ms": 22.0,
       "std_itl_ms": 2.0, "p95_itl_ms": 30.0, "p99_itl_ms": 50.0, "concurrency": 62.2,
       "accept_length": None}


def sglang_file(tmp_path, name="sglang_runs.jsonl"):
    lines = [
        RUN,  # unbounded rate (json.dumps writes Infinity), max_concurrency 64
        dict(RUN, request_rate=4.0, max_concurrency=None, concurrency=17.3,
             model_id="meta-llama/Llama-3.1-8B-Instruct"),  # a rate, measured concurrency
        {k: v for k, v in dict(RUN, request_rate="inf", max_concurrency=None).items()
         if k != "concurrency"},  # an older SGLang without "concurrency": Little's law
    ]
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert "Infinity" in path.read_text()
    return path


def cli(db, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analytics.cli", "--db", str(db), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_sglang_jsonl_every_run_ingested_with_given_hardware(tmp_path, con):
    path = sglang_file(tmp_path)
    opts = ParseOptions(hardware="H100", tp=2, precision="fp8")
    p = parse_file(path, opts=opts)
    assert (p.format, p.table, p.frame.height) == ("sglang_bench", "bench_runs", 3)
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)], opts=opts)
    runs = store.dataset_rows(con, "sglang_runs")
    assert runs["hardware"].tolist() == ["H100-80GB"] * 3
    assert runs["tp"].tolist() == [2, 2, 2] and runs["precision"].tolist() == ["fp8"] * 3
    assert runs["framework"].tolist() == ["SGLang"] * 3
    rate = runs["request_rate"].tolist()
    assert math.isnan(rate[0]) and rate[1] == 4.0 and math.isnan(rate[2])  # inf -> empty
    assert runs["concurrency"].tolist() == pytest.approx([64.0, 17.3, 2.5 * 25.0])
    assert runs["concurrency_measured"].tolist() == [False, True, True]
    assert runs["throughput_tok_s"].tolist() == [1280.0] * 3
    assert runs["in_len"].tolist() == [1024.0] * 3 and runs["out_len"].tolist() == [512.0] * 3
    assert runs["ttft_ms"].tolist() == [250.0] * 3 and runs["itl_ms"].tolist() == [22.0] * 3
    assert runs["latency_s"].tolist() == [24.0] * 3
    # the tail percentiles SGLang writes are kept (issue 30 item 1); p90 TTFT / ITL it does not
    assert runs["ttft_p99_ms"].tolist() == [900.0] * 3 and runs["itl_p99_ms"].tolist() == [50.0] * 3
    assert runs["tpot_ms"].tolist() == [23.5] * 3 and runs["tpot_p99_ms"].tolist() == [40.0] * 3
    assert runs["latency_p99_s"].tolist() == [30.0] * 3
    assert runs[["ttft_p90_ms", "itl_p90_ms", "latency_p90_s"]].isna().all().all()
    summary = store.dataset_summary(con, "sglang_runs")
    assert summary["sources"]["ttft_p99_ms"] == "p99_ttft_ms"
    assert summary["sources"]["latency_p99_s"] == "p99_e2e_latency_ms / 1000"
    assert "ttft_p90_ms" not in summary["sources"]  # not in the file: not claimed
    assert runs["model"].tolist()[1] == "meta-llama/Llama-3.1-8B-Instruct"
    assert runs["params_b"].tolist()[1] == 8.0
    measured = [w for w in p.warnings if getattr(w, "column", None) == "concurrency"]
    assert measured[0].lines == (2, 3) and "MEASURED" in measured[0]


def test_sglang_without_hardware_refused_saying_so(tmp_path):
    path = sglang_file(tmp_path)
    with pytest.raises(FormatError) as err:
        parse_file(path)
    assert err.value.reason.startswith("SGLang results carry no hardware: give --hardware")
    db = tmp_path / "h.duckdb"
    run = cli(db, "ingest", str(path))
    assert run.returncode == 2
    assert "SGLang results carry no hardware: give --hardware" in run.stderr
    assert "Extra data" not in run.stdout + run.stderr
    run = cli(db, "ingest", "--hardware", "A100-80GB", "--tp", "1", str(path))
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)[0]
    assert (doc["format"], doc["rows"]) == ("sglang_bench", 3)
    # the hardware given at ingest is stated as an assumption; --tp given: no tp assumption
    assert any("A100-80GB" in a and "given at ingest" in a for a in doc["assumptions"])
    assert not any("tensor parallel assumed" in a for a in doc["assumptions"])


def test_vllm_results_appended_into_one_jsonl(tmp_path, con):
    case = CASES / "19-vllm-bench-request-rate-no-concurrency.json"
    if not case.exists():
        missing(case)
    first = json.loads(case.read_text())
    second = dict(first, request_rate="inf", max_concurrency=32)
    third = {k: v for k, v in first.items() if k not in ("hardware", "tp", "precision")}
    path = tmp_path / "vllm_appended.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (first, second, third)))
    # the third run names no GPU: refused naming its line, with the option that fixes it
    with pytest.raises(FormatError) as err:
        parse_file(path)
    assert err.value.line == 3 and "--hardware" in err.value.reason
    p = parse_file(path, opts=ParseOptions(hardware="H100"))
    assert (p.format, p.frame.height) == ("vllm_bench", 3)
    f = p.frame
    assert f["request_rate"].to_list() == [4.0, None, 4.0]
    assert f["concurrency"].to_list() == pytest.approx([3.937 * 9.150, 32.0, 3.937 * 9.150],
                                                       abs=0.05)
    assert f["concurrency_measured"].to_list() == [True, False, True]
    assert f["hardware"].to_list() == ["H100-80GB"] * 3
    notes = [w for w in p.warnings if getattr(w, "column", None) == "max_concurrency"]
    assert [n.lines for n in notes] == [(1,), (3,)]


def test_jsonl_with_a_broken_line_names_the_line_never_extra_data(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(RUN) + "\n" + json.dumps(RUN)[:-5] + "\n")
    with pytest.raises(FormatError) as err:
        parse_file(path, opts=ParseOptions(hardware="H100"))
    assert err.value.line == 2
    assert "JSON Lines" in err.value.reason and "Extra data" not in str(err.value)


def test_vllm_result_without_hardware_takes_the_given_one_and_says_so(tmp_path):
    case = CASES / "19-vllm-bench-request-rate-no-concurrency.json"
    if not case.exists():
        missing(case)
    doc = {k: v for k, v in json.loads(case.read_text()).items() if k != "hardware"}
    path = tmp_path / "no_hw.json"
    path.write_text(json.dumps(doc, indent=2))  # pretty-printed, as --save-result writes it
    p = parse_file(path, opts=ParseOptions(hardware="A100-80GB", tp=4))
    assert p.frame["hardware"].to_list() == ["A100-80GB"]
    assert p.frame["tp"].to_list() == [1]  # the file's own tp wins over the option
    hw = [w for w in p.warnings if getattr(w, "column", None) == "hardware"]
    assert hw[0].lines == (1,) and "as given at ingest" in hw[0]
