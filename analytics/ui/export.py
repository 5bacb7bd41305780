"""The "Download and share" section every result page ends with (issue 19 item 12).

A page builds one :class:`Export`, draws its charts and tables through it (``out.chart``,
``out.table`` call ``st.plotly_chart`` / ``st.dataframe`` and remember what they drew), and calls
``out.render()`` last. That section offers every table and every chart's series as CSV and
Parquet, and the whole result as a self-contained HTML report (:mod:`analytics.ui.report`).
Files are built only when their button is clicked (callable ``data``), so a rerun costs nothing,
and a click does not rerun the page (``on_click="ignore"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analytics.ui import cache, charts, report

_MIME = {"csv": "text/csv", "parquet": "application/vnd.apache.parquet"}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_").lower() or "table"


class Export:
    """Collects what a page shows, then offers it for download.

    Args:
        page: the page title (``"Capacity"``), used in file names and the report.
        datasets: names of the stored datasets the page's result is computed from.
    """

    def __init__(self, page: str, datasets: Iterable[str] = ()):
        self.page = page
        self.datasets = [d for d in datasets if d]
        self.params: dict[str, object] = {}
        self.notes: list[str] = []
        self.figures: list[tuple[str, str, go.Figure]] = []  # (key, title, figure)
        self.tables: list[tuple[str, str, pd.DataFrame]] = []  # (key, title, frame)

    def param(self, **values: object) -> None:
        """Record parameters of the result (shown in the report's Parameters table)."""
        self.params.update(values)

    def note(self, text: str) -> None:
        """Record a sentence the page shows beside the result (a warning, an abstention)."""
        self.notes.append(str(text))

    @property
    def synthetic(self) -> bool:
        """Whether any of :attr:`datasets` is synthetic (the ledger's flag; read at each call,
        as a page may add a dataset after its first chart)."""
        ledger = cache.datasets()
        return bool(ledger.loc[ledger["name"].isin(self.datasets), "synthetic"].astype(bool).any())

    def chart(self, fig: go.Figure, key: str, title: str | None = None, container=None,
              from_data: bool = True) -> None:
        """Draw ``fig`` (``st.plotly_chart``) and keep it for the report and its series CSV.
        A result computed from a synthetic dataset is labelled on the figure (a copy: a cached
        figure is shared) whether or not its builder labelled it (issue 31 item 9);
        ``from_data=False`` marks a chart that draws no dataset (a model curve), left as is."""
        if from_data and self.synthetic:
            fig = charts.label_synthetic(go.Figure(fig), True)
        (container or st).plotly_chart(fig, key=key)
        text = title or (fig.layout.title.text if fig.layout.title else None) or key
        self.figures.append((key, str(text), fig))

    def table(self, frame, key: str, title: str | None = None, container=None,
              **kwargs) -> None:
        """Draw ``frame`` (``st.dataframe``; any of its keyword arguments) and keep it under
        ``title`` (default: the key in words)."""
        (container or st).dataframe(frame, key=key, **kwargs)
        self.keep(frame, key, title or key.replace("_", " "),
                  index=not kwargs.get("hide_index", False))

    def keep(self, frame, key: str, title: str, index: bool = False) -> None:
        """Keep a table for download without drawing it (the page drew it its own way)."""
        df = frame if isinstance(frame, pd.DataFrame) else pd.DataFrame(frame)
        if index and not isinstance(df.index, pd.RangeIndex):
            df = df.reset_index()
        self.tables.append((key, title, df))

    def html(self) -> bytes:
        """The HTML report of everything kept so far (UTF-8)."""
        rows = [info for name in self.datasets if (info := cache.dataset_info(name))]
        return report.html_report(
            self.page, self.params, rows, [(t, f) for _, t, f in self.figures],
            [(t, df) for _, t, df in self.tables], self.notes).encode()

    def render(self) -> None:
        """The page's "Download and share" section: the HTML report, then CSV and Parquet of
        every table and every chart's series."""
        st.subheader("Download and share")
        stem = _slug(f"{self.page}_{self.datasets[0] if self.datasets else 'result'}")
        st.download_button("HTML report (charts, parameters, data versions)", self.html,
                           file_name=f"{stem}_report.html", mime="text/html",
                           key=f"{_slug(self.page)}_report", on_click="ignore", type="primary")
        items: list[tuple[str, str, Callable[[], pd.DataFrame]]] = [
            (k, t, (lambda df=df: df)) for k, t, df in self.tables]
        items += [(k, f"{t} (chart series)", (lambda f=f: report.figure_frame(f)))
                  for k, t, f in self.figures]
        if not items:
            return
        with st.expander(f"{len(items)} tables and chart series (CSV, Parquet)"):
            for key, title, frame in items:
                c1, c2, c3 = st.columns([4, 1, 1])
                c1.text(title)
                for fmt, col in (("csv", c2), ("parquet", c3)):
                    col.download_button(
                        fmt.upper(), lambda frame=frame, fmt=fmt: report.table_bytes(frame(), fmt),
                        file_name=f"{stem}_{_slug(key)}.{fmt}", mime=_MIME[fmt],
                        key=f"dl_{key}_{fmt}", on_click="ignore")
