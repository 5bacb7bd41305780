"""The service layer: one target resolution, one set of defaults, input checks shared by the
CLI and the pages (real staged traces)."""

from __future__ import annotations

import json

import pytest
from conftest import shared
from harness import strict_loads

from analytics import cli
from analytics.config import DemandTarget
from analytics.ingest import files as ingest
from analytics.services import data, demand, serving

LORA = "alibaba_gpu_traces/v2026_genai/lora_request_trace.csv"
WEEK = "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"


@pytest.fixture
def two_traces(con):
    for rel in (LORA, WEEK):
        path = shared(rel)
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    return con


def test_one_target_resolution_for_token_and_gpu_second_traces(two_traces):
    con = two_traces
    # the LoRA trace reports execution time and no tokens: GPU-seconds is its only target
    assert demand.supported_targets(con, "lora_request_trace") == [DemandTarget.GPU_SECONDS]
    assert demand.resolve_target(con, "lora_request_trace") is DemandTarget.GPU_SECONDS
    assert demand.resolve_target(con, "burstgpt1_week1_per_minute_tps") == "weighted_tokens"
    # an explicit request wins, and the grid then says why it cannot be built
    g = demand.grid(con, demand.GridRequest("lora_request_trace", 3600))
    assert g["target"].sum() > 0 and (g["target"] >= 0).all()
    with pytest.raises(ValueError, match="no token counts; use target gpu_seconds"):
        demand.grid(con, demand.GridRequest("lora_request_trace", 3600,
                                            target=DemandTarget.WEIGHTED_TOKENS))


def test_cli_grid_document_is_the_service_document(two_traces, tmp_path, capsys):
    """The CLI only parses arguments: its JSON is the service's document, number for number."""
    db = tmp_path / "test.duckdb"
    two_traces.close()
    assert cli.main(["--db", str(db), "grid", "lora_request_trace", "--bin", "1h"]) == 0
    doc = strict_loads(capsys.readouterr().out)
    from analytics import store

    con = store.connect(db)
    try:
        expected = demand.grid_document(con, demand.GridRequest.of("lora_request_trace", "1h"))
    finally:
        con.close()
    assert doc == json.loads(json.dumps(expected, default=str))
    assert doc["target"] == "GPU-seconds per bin" and doc["bin_s"] == 3600


def test_capacity_and_dispatch_use_the_pages_envelope_defaults():
    """The CLI used n_boot=200 under capacity/dispatch and the pages 2,000; both now share one
    default record, so the same question gets the same envelope."""
    from analytics.envelope.pipeline import EnvelopeParams

    assert demand.DEFAULT_ENVELOPE == EnvelopeParams()
    assert demand.DEFAULT_ENVELOPE.n_boot == 2000


def test_bad_requests_are_refused_before_any_work(con, tmp_path):
    with pytest.raises(ValueError, match="policy 'nope'"):
        serving.compare(con, "any", serving.serving.ServingParams(), ("nope",))
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    with pytest.raises(ValueError, match="names one dataset"):
        data.ingest_paths(con, [a, b], name="x")
    with pytest.raises(ValueError, match="no such file"):
        data.ingest_paths(con, [a])


def test_power_default_inference_is_a_dense_token_trace(con):
    """Issue 19 item 9: the LoRA trace (GPU-seconds only, sparse, the longest span) is offered
    last; the token trace comes first and is the Power page's default."""
    from analytics.ingest import files as ingest
    from analytics.services import power

    for rel in ("alibaba_gpu_traces/v2026_genai/lora_request_trace.csv",
                "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"):
        path = shared(rel)
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    _, demand = power.candidates(con)
    assert demand == ["burstgpt1_week1_per_minute_tps", "lora_request_trace"]
