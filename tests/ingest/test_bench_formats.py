"""Benchmark formats -> bench_runs, on the real staged ML.ENERGY and Argonne files."""

from __future__ import annotations

import json

import pytest
from conftest import shared

from analytics import store
from analytics.hardware import catalog as hardware
from analytics.ingest import files as ingest
from analytics.ingest.formats import FormatError, SkippedByDesign, parse_file


def test_mlenergy_v2_runs_314_with_derived_power():
    p = parse_file(shared("ml_energy/leaderboard_v2/llm_text_generation_runs.csv"))
    f = p.frame
    assert p.format == "mlenergy_v2" and f.height == 314
    assert sorted(f["hardware"].unique().to_list()) == ["A100-40GB", "H100-80GB"]
    assert f.filter(f["hardware"] == "A100-40GB").height == 157
    assert sorted(f["tp"].unique().to_list()) == [1, 2, 4, 8]
    # first row: gemma-2-27b-it, A100, TP4, bs128: 230.644 J/req over 392.471 tokens at 1051.34
    # tok/s -> 0.58767 J/token and 617.8 W for the four GPUs
    row = f.filter((f["model"] == "google/gemma-2-27b-it") & (f["concurrency"] == 128)
                   & (f["hardware"] == "A100-40GB") & (f["task"] == "chat")).row(0, named=True)
    assert row["energy_per_token_j"] == pytest.approx(230.644433524673 / 392.47133333333335)
    assert row["power_w"] == pytest.approx(row["energy_per_token_j"] * 1051.3354539260472)
    assert row["itl_ms"] == pytest.approx(112.20224938943191)
    assert row["params_b"] == 27  # from the sibling models.json
    mixtral = f.filter(f["model"].str.contains("Mixtral"))
    assert mixtral.height == 41 and mixtral["active_params_b"].null_count() == 41


def test_mlenergy_v3_flat_and_task_json_agree():
    flat = parse_file(shared("ml_energy/leaderboard_v3/all_task_configurations_flat.csv")).frame
    assert flat.height == 838  # LLM configurations; 1,020 diffusion ones skipped
    chat = parse_file(shared("ml_energy/leaderboard_v3/tasks/lm-arena-chat.json")).frame
    assert chat.height == 328 == flat.filter(flat["task"] == "lm-arena-chat").height
    big = chat.filter((chat["model"] == "meta-llama/Llama-3.1-405B-Instruct")
                      & (chat["concurrency"] == 512)).row(0, named=True)
    assert (big["hardware"], big["n_gpus"], big["precision"]) == ("B200", 8, "bf16")
    assert big["power_w"] == pytest.approx(7655, abs=1)  # all eight GPUs together
    with pytest.raises(SkippedByDesign, match="diffusion") as skipped:
        parse_file(shared("ml_energy/leaderboard_v3/tasks/text-to-image.json"))
    assert skipped.value.format == "mlenergy_v3"


def test_argonne_all_results_and_power_units():
    p = parse_file(shared("llm_inference_bench_argonne/All_results.csv"))
    f = p.frame
    assert p.format == "argonne_bench" and f.height == 4772
    assert set(f["hardware"].unique().to_list()) == {
        "A100-40GB", "H100-80GB", "GH200", "MI250", "MI300X", "Gaudi2", "Max1550", "SN40L"}
    # GH200 Mistral-7B, L=128, batch 16: Throughput 4820.81 counts 2L tokens per request
    row = f.filter((f["hardware"] == "GH200") & (f["concurrency"] == 16)
                   & (f["model"] == "mistralai/Mistral-7B-v0.1") & (f["in_len"] == 128)
                   & (f["framework"] == "TensorRT-LLM")).row(0, named=True)
    assert row["throughput_tok_s"] == pytest.approx(4820.8103181615925 / 2)
    assert row["throughput_tok_s"] == pytest.approx(16 * 128 / row["latency_s"], rel=1e-6)
    pw = parse_file(shared("llm_inference_bench_argonne/Fig_16_a_b__power_results.csv")).frame
    assert pw.height == 48
    a100 = pw.filter(pw["hardware"] == "A100-40GB")["power_w"]
    assert a100.max() < 400 and a100.min() > 100  # milliwatts -> W, within the A100 TDP


def test_argonne_quant_table_with_unquoted_commas():
    f = parse_file(shared("llm_inference_bench_argonne/Fig_3__qaunt_results__quant_all_results.csv")
                   ).frame
    assert f.height == 156
    assert f.filter(f["precision"] == "fp8").height >= 20  # the 20 ragged rows are fp8 ones


def test_argonne_ttft_table_skips_ragged_rows():
    p = parse_file(shared("llm_inference_bench_argonne/Fig_22__all_results_TTFT_ITL.csv"))
    assert p.frame.height == 27 and p.frame["ttft_ms"].null_count() == 0
    assert any("3 ragged" in w for w in p.warnings)


def _vllm_doc(**meta):
    return {"date": "20240510-120130", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B",
            "num_prompts": 100, "completed": 100, "max_concurrency": 32, "duration": 60.0,
            "total_input_tokens": 102400, "total_output_tokens": 25600,
            "request_throughput": 1.6, "output_throughput": 426.7,
            "total_token_throughput": 2133.3, "mean_ttft_ms": 120.0, "median_ttft_ms": 110.0,
            "median_itl_ms": 21.0, "median_e2el_ms": 5500.0, **({"metadata": meta} if meta
                                                                 else {})}


def test_vllm_bench_result_needs_hardware_metadata(tmp_path):
    ok = tmp_path / "run.json"
    ok.write_text(json.dumps(_vllm_doc(hardware="H100", tp="2", precision="fp8")))
    row = parse_file(ok).frame.row(0, named=True)
    assert (row["hardware"], row["tp"], row["precision"]) == ("H100-80GB", 2, "fp8")
    assert row["in_len"] == 1024 and row["out_len"] == 256 and row["concurrency"] == 32
    assert row["params_b"] == 8 and row["ttft_ms"] == 110 and row["latency_s"] == 5.5
    bad = tmp_path / "nohw.json"
    bad.write_text(json.dumps(_vllm_doc()))
    with pytest.raises(FormatError, match="--metadata hardware="):
        parse_file(bad)


def test_bench_ingest_is_one_transaction_and_deduplicates(con):
    files = [shared("llm_inference_bench_argonne/Fig_16_a__power_results.csv"),
             shared("llm_inference_bench_argonne/Fig_16_a_b__power_results.csv")]
    res = ingest.ingest_files(con, [ingest.FileIn(f, f.name) for f in files])
    assert [r["rows"] for r in res] == [40, 48]
    runs = store.bench_runs(con)
    assert len(runs) <= 48  # the 40-row table is a subset of the 48-row one
    assert store.table_counts(con)["bench_runs"] == 88


def test_hardware_normalisation_and_specs():
    assert hardware.normalise("NVIDIA H100 80GB HBM3") == "H100-80GB"
    assert hardware.normalise("AMD MI300X GPU") == "MI300X"
    assert hardware.CATALOG["H100-80GB"].fp8_tflops == 2 * hardware.CATALOG["H100-80GB"].bf16_tflops
    assert all(s.sources for s in hardware.CATALOG.values())


def test_pull_registry_hashes_match_the_staged_benchmark_files():
    import hashlib

    from analytics.ingest import sources

    staged = {"mlenergy_v3_gpqa": "ml_energy/leaderboard_v3/tasks/gpqa.json",
              "mlenergy_v3_sourcegraph_fim": "ml_energy/leaderboard_v3/tasks/sourcegraph-fim.json",
              "argonne_all_results": "llm_inference_bench_argonne/All_results.csv",
              "argonne_power": "llm_inference_bench_argonne/Fig_16_a_b__power_results.csv",
              "argonne_ttft_itl": "llm_inference_bench_argonne/Fig_22__all_results_TTFT_ITL.csv"}
    for name, rel in staged.items():
        data = shared(rel).read_bytes()
        src = sources.REGISTRY[name]
        assert hashlib.sha256(data).hexdigest() == src.sha256 and len(data) == src.size_bytes
        assert src.filename.endswith(shared(rel).name.split("__")[-1])
