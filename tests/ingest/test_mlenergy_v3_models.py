"""Issue 19 item 1: ML.ENERGY leaderboard v3 per-model files (``models/<org>__<model>__<task>
.json``) are read like the tasks files (model id, task, parameter counts and precision once per
file; parallel degrees under each configuration's ``parallelization``); diffusion-only files are
reported ``skipped`` (by design), not ``rejected``; the same configuration in a tasks file and a
per-model file is one row of the advisor's training data."""

from __future__ import annotations

import io
import json

import polars as pl
import pytest
from conftest import SHARED_DATA, shared
from harness import strict_loads

from analytics import cli, store
from analytics.config import ParseOptions
from analytics.ingest import files as ingest
from analytics.ingest.formats import FormatError, SkippedByDesign, parse_file
from analytics.services import data

V3 = "ml_energy/leaderboard_v3"


def _models(task: str) -> list:
    return sorted(shared(f"{V3}/models").glob(f"*__{task}.json"))


def _rows(frame: pl.DataFrame) -> list[tuple]:
    return sorted(frame.rows(), key=repr)


def test_per_model_files_give_the_rows_of_their_tasks_file():
    tasks = parse_file(shared(f"{V3}/tasks/gpqa.json")).frame
    per_model = pl.concat([parse_file(p).frame for p in _models("gpqa")])
    assert tasks.height == 187 == per_model.height
    assert _rows(per_model) == _rows(tasks)  # every canonical column equal, row for row


def test_qwen3_14b_gpqa_first_configuration_values():
    p = parse_file(shared(f"{V3}/models/Qwen__Qwen3-14B__gpqa.json"))
    assert p.format == "mlenergy_v3" and p.frame.height == 9
    row = p.frame.filter((pl.col("hardware") == "B200") & (pl.col("concurrency") == 8)
                         ).row(0, named=True)
    # the file's first configuration; model id, task, params and precision are file-level
    assert (row["model"], row["task"], row["n_gpus"], row["tp"], row["precision"]) == (
        "Qwen/Qwen3-14B", "gpqa", 1, 1, "bf16")
    assert row["params_b"] == 14.0 == row["active_params_b"]
    assert row["power_w"] == pytest.approx(319.7883095908309)
    assert row["energy_per_token_j"] == pytest.approx(1.3662634337367148)
    assert row["throughput_tok_s"] == pytest.approx(234.06050523961807)
    assert row["itl_ms"] == pytest.approx(33.62808651581872)
    assert row["out_len"] == pytest.approx(7026.242424242424)
    # the ITL tail the leaderboard measured (issue 30 item 1), as the flat CSV writes it
    assert row["itl_p90_ms"] == pytest.approx(51.68297459313183)
    assert row["itl_p99_ms"] == pytest.approx(68.6399259546306)
    flat = parse_file(shared(f"{V3}/all_task_configurations_flat.csv")).frame.filter(
        (pl.col("model") == "Qwen/Qwen3-14B") & (pl.col("task") == "gpqa")
        & (pl.col("hardware") == "B200") & (pl.col("concurrency") == 8)).row(0, named=True)
    assert (flat["itl_p90_ms"], flat["itl_p99_ms"]) == (row["itl_p90_ms"], row["itl_p99_ms"])


def test_expert_parallel_configuration_keeps_tp_from_parallelization():
    f = parse_file(shared(f"{V3}/models/Qwen__Qwen3-30B-A3B-Instruct-2507__lm-arena-chat.json")
                   ).frame
    two = f.filter((pl.col("hardware") == "H100-80GB") & (pl.col("n_gpus") == 2))
    # parallelization {tensor_parallel: 1, expert_parallel: 2}: two GPUs, TP 1
    assert two.height == 14 and two["tp"].unique().to_list() == [1]
    assert (f["params_b"].unique().to_list(), f["active_params_b"].unique().to_list()) == (
        [30.0], [3.0])  # MoE: 30 B total, 3 B activated (file-level)


def _model_file(tmp_path, name: str, configurations: list[dict], **top) -> str:
    doc = {"model_id": "acme/Tiny-7B", "task": "lm-arena-chat", "total_params_billions": 7.0,
           "activated_params_billions": 7.0, "weight_precision": "bfloat16", **top,
           "configurations": configurations}
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2))
    return path


LLM = {"avg_output_len": 500.0, "avg_power_watts": 700.0, "energy_per_token_joules": 0.5,
       "gpu_model": "H100", "max_num_seqs": 64, "median_itl_ms": 20.0, "num_gpus": 2,
       "output_throughput_tokens_per_sec": 1400.0,
       "parallelization": {"data_parallel": 1, "expert_parallel": 1, "notes": "",
                           "tensor_parallel": 2}}
IMAGE = {"avg_power_watts": 530.5, "batch_latency_s": 0.64, "batch_size": 1,
         "energy_per_image_joules": 342.0, "gpu_model": "B200", "num_gpus": 1,
         "parallelization": {"ring_degree": 1, "ulysses_degree": 1},
         "throughput_images_per_sec": 1.55}


def test_own_per_model_file_mixed_llm_and_diffusion(tmp_path):
    fp8 = {**LLM, "weight_precision": "fp8", "max_num_seqs": 128}  # a configuration's own wins
    p = parse_file(_model_file(tmp_path, "acme__Tiny-7B__lm-arena-chat.json", [LLM, IMAGE, fp8]))
    f = p.frame.sort("concurrency")
    assert f.height == 2
    assert f["tp"].to_list() == [2, 2] and f["n_gpus"].to_list() == [2, 2]
    assert f["precision"].to_list() == ["bf16", "fp8"]
    assert f["model"].unique().to_list() == ["acme/Tiny-7B"]
    assert f["power_w"].to_list() == [700.0, 700.0]
    assert "1 diffusion configurations skipped (no tokens)" in p.warnings


def test_own_per_model_file_without_tensor_parallel_names_the_configuration(tmp_path):
    bad = {**LLM, "parallelization": {"data_parallel": 2, "notes": ""}}
    path = _model_file(tmp_path, "acme__Tiny-7B__gpqa.json", [LLM, bad])
    with pytest.raises(FormatError) as err:
        parse_file(path)
    text = path.read_text().splitlines()
    # the line the second configuration opens on, and which field of which configuration
    starts = [i + 1 for i, line in enumerate(text) if line == "    {"]
    assert (err.value.line, err.value.column, err.value.reason) == (
        starts[1], "configurations[1].tensor_parallel", "empty value")
    assert not isinstance(err.value, SkippedByDesign)


def test_diffusion_only_file_is_skipped_by_every_door(tmp_path, capsys):
    path = _model_file(tmp_path, "acme__Paint-1B__text-to-image.json", [IMAGE, IMAGE],
                       task="text-to-image")
    reason = ("all 2 configurations are diffusion runs (images / videos, no tokens): nothing "
              "for bench_runs")
    # CLI: a valid file that holds nothing by design exits 0 and says so; the store is not
    # even created
    db = tmp_path / "cli.duckdb"
    assert cli.main(["--db", str(db), "ingest", str(path)]) == 0
    [doc] = strict_loads(capsys.readouterr().out)
    assert (doc["status"], doc["reason"], doc["format"], doc["rows"]) == (
        "skipped", reason, "mlenergy_v3", 0)
    assert not db.exists()
    # a batch with a good file: the good one is ingested, the skipped one reported, in order
    good = shared(f"{V3}/models/Qwen__Qwen3-8B__gpqa.json")
    assert cli.main(["--db", str(db), "ingest", str(path), str(good)]) == 0
    docs = strict_loads(capsys.readouterr().out)
    assert [(d["status"], d["rows"]) for d in docs] == [("skipped", 0), ("ingested", 10)]
    # browser upload
    con = store.connect(tmp_path / "up.duckdb")
    up = io.BytesIO(path.read_bytes())
    up.name = path.name
    [res] = data.ingest_uploads(con, [up], ParseOptions(), 10**9, tmp_path / "uploads")
    assert (res["status"], res["reason"], res["file"]) == ("skipped", reason, path.name)
    assert store.list_datasets(con).empty


def test_bootstrap_of_the_v3_folder_counts_skipped_apart(tmp_path):
    con = store.connect(tmp_path / "b.duckdb")
    res = ingest.bootstrap(con, SHARED_DATA / V3)
    by = {s: sorted(r["file"] for r in res if r["status"] == s)
          for s in ("ingested", "duplicate", "skipped", "rejected")}
    assert len(by["ingested"]) == 50 + 5 + 1  # LLM model files, LLM tasks files, flat CSV
    assert by["rejected"] == [] and by["duplicate"] == []
    assert len(by["skipped"]) == 12 + 2  # diffusion model files, text-to-image / -video tasks
    assert "text-to-video.json" in by["skipped"]
    skip = next(r for r in res if r["file"] == "zai-org__CogVideoX-2b__text-to-video.json")
    assert skip["reason"].startswith("all 32 configurations are diffusion runs")
    # three copies of each LLM configuration (flat CSV, tasks, models): counted once
    assert store.table_counts(con)["bench_runs"] == 3 * 838
    assert len(store.bench_runs(con)) == 838


def test_advisor_training_rows_do_not_double_count_model_files(tmp_path):
    """The advisor fits on :func:`store.bench_runs`, which keeps one row per distinct measured
    configuration and result: a per-model file's configuration equals its tasks-file copy in
    every column, so adding the model files changes no training row. (Two configurations that
    share model, GPU, TP and batch size but were measured twice, e.g. gpt-oss-20b on one H100 at
    96 sequences in gpqa, stay two rows: they are two measurements.)"""
    con = store.connect(tmp_path / "a.duckdb")
    tasks = [shared(f"{V3}/tasks/{t}.json") for t in ("gpqa", "sourcegraph-fim")]
    ingest.ingest_files(con, [ingest.FileIn(p, p.name) for p in tasks])
    def training_rows():
        rows = store.bench_runs(con).drop(columns="dataset")
        return rows.sort_values(list(rows.columns)).reset_index(drop=True)

    before = training_rows()
    models = _models("gpqa") + _models("sourcegraph-fim")
    ingest.ingest_files(con, [ingest.FileIn(p, p.name) for p in models])
    after = training_rows()
    assert store.table_counts(con)["bench_runs"] == 2 * (187 + 50)
    assert len(after) == len(before) == 187 + 50
    assert after.equals(before)
    twice = after[(after["model"] == "openai/gpt-oss-20b") & (after["hardware"] == "H100-80GB")
                  & (after["concurrency"] == 96)]
    assert len(twice) == 2 and twice["power_w"].nunique() == 2
