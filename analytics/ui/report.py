"""Self-contained HTML reports and downloadable tables of a page's result (issue 19 item 12).

Pure functions, no Streamlit: :func:`html_report` turns what a page showed -- its parameters,
the ledger rows of the datasets it read (the data versions), its Plotly figures and tables --
into one HTML file a planner can send without the app. The charts stay interactive: plotly.js
is embedded once, inline, so the file opens offline. Every user-supplied string (dataset, file
and model names, table cells) is HTML-escaped.

:func:`figure_frame` turns a figure's traces into a tidy table (one row per point), so every
series on a chart can be downloaded as CSV or Parquet (:func:`table_bytes`).
"""

from __future__ import annotations

import html
import io
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

#: The paper each page implements (../shared/papers/INDEX.md), cited in its report.
PAPERS = {
    "Demand": "Conformal GPU Demand Envelopes and Power-Aware Scheduling for Heterogeneous AI "
              "Clusters under Cold Start and Cross-Cloud Shift",
    "Placement": "OmniPilot: calibrated, abstention-aware launch advisor for vLLM on shared GPU "
                 "clusters",
    "Serving": "Festina: Energy-Aware Scheduling for Serverless LLM Serving on Shared GPUs",
    "Power": "Workload composition smooths aggregate power demand while sustaining "
             "short-horizon ramps in AI data centers",
}
PAPERS["Coverage"] = PAPERS["Capacity"] = PAPERS["Dispatch"] = PAPERS["Demand"]
PAPERS["Telemetry"] = PAPERS["Placement"]

#: Ledger columns a report lists for each dataset it read (name, what, how much, when, where
#: from, its content hash: the data version the numbers belong to).
LEDGER_COLUMNS = ("name", "kind", "format", "rows", "ts_min", "ts_max", "source", "sha256",
                  "ingested_at", "synthetic")
#: Rows of a table shown in the report; the full table is in its CSV/Parquet download.
REPORT_TABLE_ROWS = 500

_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;font-size:13px;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}.note{color:#555;font-size:13px}
.synthetic{color:#b00;font-weight:bold}
.wide{overflow-x:auto;max-width:100%}td{word-break:break-word;max-width:28em}"""


def figure_frame(fig: go.Figure) -> pd.DataFrame:
    """The points of every trace of ``fig`` as one tidy table.

    Returns:
        DataFrame with columns ``trace`` (the trace's legend name, or ``trace <i>``), ``x``,
        ``y`` and, where a trace has them, ``text`` and ``customdata``; one row per point, in
        trace order. Traces without x/y (e.g. a pie) contribute their labels/values as x/y.
        An empty figure gives an empty table with columns ``trace, x, y``.
    """
    parts = []
    for i, tr in enumerate(fig.data):
        name = tr.name if getattr(tr, "name", None) else f"trace {i}"
        x = getattr(tr, "x", None)
        y = getattr(tr, "y", None)
        if x is None and y is None and getattr(tr, "values", None) is not None:
            x, y = tr.labels, tr.values
        if x is None and y is None:
            continue
        n = len(y if y is not None else x)
        part = pd.DataFrame({"trace": [name] * n,
                             "x": list(x) if x is not None else list(range(n)),
                             "y": list(y) if y is not None else [None] * n})
        text = getattr(tr, "text", None)
        if text is not None and not isinstance(text, str) and len(text) == n:
            part["text"] = list(text)
        parts.append(part)
    if not parts:
        return pd.DataFrame({"trace": [], "x": [], "y": []})
    return pd.concat(parts, ignore_index=True)


def table_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """``frame`` as ``"csv"`` (UTF-8, no index) or ``"parquet"`` bytes.

    Raises:
        ValueError: ``fmt`` is neither.
    """
    if fmt == "csv":
        return frame.to_csv(index=False).encode()
    if fmt == "parquet":
        buf = io.BytesIO()
        # object columns mixing types (e.g. a label column with numbers) as text, not an error
        safe = frame.copy()
        for col in safe.columns:
            if safe[col].dtype == object:
                safe[col] = safe[col].map(lambda v: None if v is None else str(v))
        safe.columns = [str(c) for c in safe.columns]
        safe.to_parquet(buf, index=False)
        return buf.getvalue()
    raise ValueError(f"unknown table format {fmt!r}: use 'csv' or 'parquet'")


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:,.6g}"
    if isinstance(value, (dict, list, tuple)):
        return html.escape(json.dumps(value, default=str))
    return html.escape(str(value))


def _html_table(frame: pd.DataFrame, limit: int = REPORT_TABLE_ROWS) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>"
                   for row in frame.head(limit).itertuples(index=False, name=None))
    more = (f'<p class="note">{len(frame):,} rows; the first {limit:,} are shown, the full '
            "table is in the page's CSV / Parquet download.</p>") if len(frame) > limit else ""
    # a wide table scrolls inside its box instead of overflowing the page (issue 31 item 8)
    return f'<div class="wide"><table><tr>{head}</tr>{rows}</table></div>{more}'


def _version() -> str:
    try:
        return metadata.version("headroom")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "source tree"


def html_report(page: str, params: Mapping[str, object], datasets: Sequence[Mapping],
                figures: Sequence[tuple[str, go.Figure]],
                tables: Sequence[tuple[str, pd.DataFrame]],
                notes: Sequence[str] = (), generated_at: datetime | None = None) -> str:
    """One self-contained HTML document with a page's result.

    Args:
        page: the page's title (``"Capacity"``); it picks the paper cited (:data:`PAPERS`).
        params: the parameters the result was computed with, shown as a table.
        datasets: ledger rows (dicts) of the datasets read; :data:`LEDGER_COLUMNS` of each are
            listed -- the sha256 is the data version the numbers belong to. A synthetic dataset
            is flagged in red.
        figures: (title, Plotly figure) pairs, drawn interactive; plotly.js is inlined once, so
            the file needs no network.
        tables: (title, frame) pairs; the first :data:`REPORT_TABLE_ROWS` rows of each.
        notes: sentences the page showed beside the result (warnings, abstentions).
        generated_at: the time stamp printed (default: now, UTC).

    Returns:
        The document as a string (UTF-8 when encoded); every user-supplied string escaped.
    """
    when = (generated_at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")
    esc = html.escape
    out = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
           f"<title>headroom - {esc(page)} report</title><style>{_CSS}</style>",
           f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>",
           f"<h1>headroom - {esc(page)}</h1>",
           f"<p class='note'>Generated {when} by headroom {esc(_version())}.</p>"]
    if any(bool(d.get("synthetic")) for d in datasets):
        out.append("<p class='synthetic'>SYNTHETIC demo data: generated, not measured.</p>")
    if page in PAPERS:
        out.append(f"<p class='note'>Method: {esc(PAPERS[page])}.</p>")
    out.append("<h2>Parameters</h2>")
    out.append(_html_table(pd.DataFrame({"parameter": list(params),
                                         "value": [str(v) for v in params.values()]})))
    out.append("<h2>Data (versions and sources)</h2>")
    ledger = pd.DataFrame([{c: d.get(c) for c in LEDGER_COLUMNS} for d in datasets],
                          columns=list(LEDGER_COLUMNS))
    out.append(_html_table(ledger) if len(ledger) else "<p class='note'>No stored dataset.</p>")
    for note in notes:
        out.append(f"<p class='note'>{esc(str(note))}</p>")
    for title, fig in figures:
        out.append(f"<h2>{esc(title)}</h2>")
        out.append(fig.to_html(full_html=False, include_plotlyjs=False))
    for title, frame in tables:
        out.append(f"<h2>{esc(title)}</h2>")
        out.append(_html_table(frame))
    out.append("</body></html>")
    return "\n".join(out)
