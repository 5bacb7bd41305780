"""Issue 19 item 12: every result table and chart series downloadable (CSV, Parquet), and a
page's result as one self-contained HTML report."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pandas as pd
import plotly.graph_objects as go
import pytest
from harness import SHARED_DATA, missing, new_app, uploader_key

from analytics.ui import report


def two_traces() -> go.Figure:
    fig = go.Figure(go.Scatter(x=[1, 2, 3], y=[10.0, 20.0, 30.0], name="demand"))
    fig.add_bar(x=["a", "b"], y=[5, 6])
    return fig


def test_figure_frame_has_every_point_of_every_trace():
    frame = report.figure_frame(two_traces())
    assert frame["trace"].tolist() == ["demand"] * 3 + ["trace 1"] * 2
    assert frame["x"].tolist() == [1, 2, 3, "a", "b"]
    assert frame["y"].tolist() == [10.0, 20.0, 30.0, 5, 6]
    assert report.figure_frame(go.Figure()).columns.tolist() == ["trace", "x", "y"]


def test_table_bytes_round_trip_csv_and_parquet():
    frame = pd.DataFrame({"site": ["CISO", "ERCO"], "tco2e": [1.25, 0.5],
                          "mixed": ["x", 3]})  # an object column with two types
    assert pd.read_csv(io.BytesIO(report.table_bytes(frame, "csv")))["tco2e"].tolist() == [1.25, 0.5]
    back = pd.read_parquet(io.BytesIO(report.table_bytes(frame, "parquet")))
    assert back["site"].tolist() == ["CISO", "ERCO"] and back["mixed"].tolist() == ["x", "3"]
    with pytest.raises(ValueError, match="csv"):
        report.table_bytes(frame, "xlsx")


def test_html_report_is_self_contained_and_escapes_user_strings():
    evil = "<script>alert(1)</script>"
    ledger = [{"name": evil, "format": "csv", "rows": 3, "sha256": "ab" * 32,
               "source": "upload", "synthetic": True}]
    big = pd.DataFrame({"bin": range(report.REPORT_TABLE_ROWS + 7)})
    doc = report.html_report("Capacity", {"alpha": 0.01, "dataset": evil}, ledger,
                             [("Demand <b>", two_traces())], [("bins", big)],
                             notes=[f"abstained: {evil}"],
                             generated_at=datetime(2026, 12, 1, tzinfo=UTC))
    assert evil not in doc and "&lt;script&gt;alert(1)&lt;/script&gt;" in doc
    assert doc.count("<script type='text/javascript'>") == 1  # plotly.js inlined once
    assert "<script src" not in doc  # plotly.js is inline: no network needed for the charts
    assert "Plotly.newPlot" in doc and "ab" * 32 in doc  # a live chart; the data version
    assert "SYNTHETIC" in doc and "Generated 2026-12-01 00:00:00 UTC" in doc
    assert f"{len(big):,} rows; the first {report.REPORT_TABLE_ROWS:,} are shown" in doc
    assert report.PAPERS["Capacity"] in doc
    # issue 31 item 8: every table scrolls inside its own box, never past the page
    assert doc.count('<div class="wide"><table>') == doc.count("<table>") >= 2


def test_telemetry_page_offers_report_and_every_table_and_series(app_env):
    path = SHARED_DATA.parent / "cases" / "20-dcgm-two-nodes-same-gpu-index.prom"
    if not path.exists():
        missing(path)
    at = new_app().run()
    at.switch_page("pages/data.py").run()
    at.file_uploader(key=uploader_key(at)).set_value([(path.name, path.read_bytes(),
                                                       "text/plain")])
    at.run()
    at.button(key="ingest").click().run()
    at.switch_page("pages/telemetry.py").run()
    assert not at.exception
    keys = {b.key for b in at.get("download_button")}
    assert "telemetry_report" in keys
    for key in ("window_table", "energy_table", "telemetry_chart", "cdf_chart"):
        assert {f"dl_{key}_csv", f"dl_{key}_parquet"} <= keys, key
