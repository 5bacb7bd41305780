"""analytics.schema.conform: the one place a frame meets its canonical table."""

from __future__ import annotations

from datetime import datetime

import polars as pl
import pytest
from conftest import shared

from analytics import schema
from analytics.ingest.formats import parse_file


def test_conform_orders_casts_and_pads():
    frame = pl.DataFrame({"power_w": [120.5], "gpu_id": [3], "ts": [datetime(2024, 5, 10, 12)],
                          "extra": ["dropped"]})
    out = schema.conform(frame, "telemetry")
    assert out.columns == list(schema.CANONICAL["telemetry"])
    assert out.schema["gpu_id"] == pl.Int32  # Int64 in, canonical Int32 out
    assert out["power_w"].to_list() == [120.5] and out["host"].to_list() == [None]
    assert schema.conform(out, "telemetry").equals(out)


def test_conform_defaults_and_unknown_table():
    frame = pl.DataFrame({"site": ["X"], "ts": [datetime(2024, 1, 1)], "gco2_per_kwh": [90.0]})
    out = schema.conform(frame, "carbon_intensity", defaults={"basis": "avg"})
    assert out.row(0) == ("X", datetime(2024, 1, 1), 90.0, "avg")
    with pytest.raises(KeyError):
        schema.conform(frame, "no_such_table")


def test_parsed_frames_are_canonical():
    # Azure has no gpu_s column: parse_file pads it, so every format meets the store's schema
    p = parse_file(shared("azure_llm/AzureLLMInferenceTrace_code.csv"))
    assert p.frame.schema == pl.Schema(schema.CANONICAL["requests"])
    assert p.frame["gpu_s"].null_count() == p.frame.height == 8819
