"""Widgets shared by several pages: the chosen dataset, the bin selector, the envelope
controls. Values shared across pages live in ``st.session_state`` so navigation keeps them."""

from __future__ import annotations

from datetime import datetime

import streamlit as st

from analytics.config import BIN_CHOICES_S, MIN_ENVELOPE_BINS, bin_choices, envelope_bin_choices
from analytics.envelope import forecast
from analytics.envelope.pipeline import EnvelopeParams
from analytics.ui import cache

#: Miscoverage levels offered: 99.9 % to 70 % envelopes (capacity planners size on 99 % and
#: 99.9 %)
ALPHAS = [0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3]
#: the shared envelope settings' defaults: the point model is chosen per dataset ("auto": the
#: learned model with the lowest calibration WAPE, stated on the page; issue 31 item 5)
_SHARED = {"alpha": 0.1, "horizon": 1, "base_model": "auto", "split": "auto"}
SPLITS = ("auto", "42/9/10 days", "0.69/0.15/0.16", "0.6/0.2/0.2")


def chosen_dataset() -> tuple[str, dict]:
    """The sidebar's demand dataset and its ledger row; on none, say so and stop the page.

    A synthetic dataset gets its warning here, so every page that uses this labels it.
    """
    name = st.session_state.get("dataset")
    info = cache.dataset_info(name) if name else None
    if info is None:
        st.info("No demand dataset yet. Add one on the Data page (upload, pull, or the "
                "synthetic demo).")
        stop()
    if info["synthetic"]:
        st.warning("SYNTHETIC demo data: generated, not measured traffic.")
    return name, info


def synthetic_among(names, kind: str | None = None) -> list[str]:
    """The synthetic datasets among ``names`` (or, with ``kind``, among every stored dataset of
    that canonical table), in ledger order: what a page's charts must be labelled for."""
    ledger = cache.datasets()
    rows = ledger[ledger["synthetic"].astype(bool)]
    rows = rows[rows["kind"] == kind] if kind is not None else rows[rows["name"].isin(list(names))]
    return rows["name"].tolist()


def warn_synthetic(names: list[str], what: str) -> bool:
    """Say which synthetic datasets ``what`` (the page's input, e.g. "carbon intensity") comes
    from; True when there are any (label the charts)."""
    if names:
        st.warning(f"SYNTHETIC {what}: {', '.join(plain(n) for n in names)} is generated for "
                   "the offline demo, not measured.")
    return bool(names)


def shared_bin(choices: list[str], key: str, container=None,
               preferred: list[str] | None = None) -> str:
    """Bin selector whose choice is shared by every page (``st.session_state["envelope_bin"]``,
    like the envelope settings), so moving from Demand to Coverage keeps the bin.

    ``choices`` are the bins this page can use for the dataset; a shared choice it cannot use
    falls back to 5 minutes if ``preferred`` (the bins an envelope can calibrate on; default:
    all choices) has it, else to the first preferred bin, else to the first choice. ``key``
    keeps each page's widget distinct.
    """
    chosen = st.session_state.get("envelope_bin")
    good = [c for c in (choices if preferred is None else preferred) if c in choices]
    default = chosen if chosen in choices else (
        "5min" if "5min" in good else (good or choices)[0])
    value = (container or st).selectbox("Bin", choices, index=choices.index(default), key=key)
    st.session_state["envelope_bin"] = value
    return value


def intraday_bin(info: dict, key: str, what: str) -> str:
    """Bin selector for envelope pages: intra-day bins the dataset supports that give at least
    ``MIN_ENVELOPE_BINS`` bins (enough calibration bins), shared across pages (see
    :func:`shared_bin`). Says when 5 minutes is not offered and why; stops the page if no bin
    can work."""
    span_s = (info["ts_max"] - info["ts_min"]).total_seconds()
    supported = [c for c in bin_choices(float(info["resolution_s"] or 0), span_s,
                                        info["kind"] != "requests") if BIN_CHOICES_S[c] < 86400]
    if not supported:
        st.info(f"{info['name']} is binned by day; {what} need intra-day bins.")
        stop()
    choices = envelope_bin_choices(supported, span_s)
    if not choices:
        st.info(f"{info['name']} spans {span_s / 60:,.0f} minutes: even {supported[0]} bins give "
                f"fewer than {MIN_ENVELOPE_BINS} bins, too few to calibrate {what}.")
        stop()
    if "5min" not in choices:
        st.caption(f"Bins offered give at least {MIN_ENVELOPE_BINS} bins over this "
                   f"{span_s / 3600:,.1f}-hour dataset (enough to calibrate the intervals); "
                   f"5 min would give {span_s / 300:,.0f}.")
    return shared_bin(choices, key)


def envelope_controls(prefix: str) -> EnvelopeParams:
    """Envelope parameter widgets, shared by the Demand, Coverage, Capacity and Dispatch pages.

    The chosen values live in ``st.session_state["envelope_<name>"]`` so every page shows the
    same run; ``prefix`` keeps the widget keys of each page distinct.
    """
    vals = {k: st.session_state.get(f"envelope_{k}", v) for k, v in _SHARED.items()}
    c1, c2, c3, c4 = st.columns(4)
    alpha = c1.select_slider("alpha (miscoverage)", ALPHAS, value=vals["alpha"],
                             key=f"{prefix}_alpha", format_func=lambda a: f"{a:g}",
                             help="intervals aim at 1 - alpha coverage (0.001: a 99.9 % "
                                  "envelope). A small alpha needs a long calibration window: "
                                  "CQR needs at least 2/alpha calibration bins; the page says "
                                  "when this series has too few.")
    horizon = c2.number_input("horizon (bins ahead)", 1, 288, int(vals["horizon"]),
                              key=f"{prefix}_horizon")
    models = [forecast.AUTO, *forecast.LEARNED]
    base = c3.selectbox("point model under the intervals", models,
                        index=models.index(vals["base_model"]), key=f"{prefix}_base",
                        format_func=lambda m: "auto: best on calibration" if m == forecast.AUTO
                        else m,
                        help="auto: the learned model with the lowest WAPE on the calibration "
                             "window of this dataset (the page says which it chose)")
    split = c4.selectbox("split (fit/calibration/test)", SPLITS,
                         index=SPLITS.index(vals["split"]), key=f"{prefix}_split",
                         help="auto = the paper's 42/9/10 days when the series has 61 days, "
                              "else fractions 0.69/0.15/0.16")
    for k, v in {"alpha": alpha, "horizon": horizon, "base_model": base, "split": split}.items():
        st.session_state[f"envelope_{k}"] = v
    return envelope_params(alpha, horizon, base, split)


def envelope_params(alpha: float, horizon: int, base_model: str, split: str) -> EnvelopeParams:
    """The envelope parameters of the widget values (``split`` one of :data:`SPLITS`)."""
    days = (42, 9, 10) if split == "42/9/10 days" else None
    frac = tuple(float(x) for x in split.split("/")) if split[0] == "0" else None
    return EnvelopeParams(alpha=float(alpha), horizon=int(horizon), base_model=base_model,
                          split_days=days, split_frac=frac)


#: Characters that make Markdown, HTML or LaTeX inside a line (links and images need ``[``;
#: Streamlit's ``:color[...]`` directives too); line-start markers do not occur mid-sentence.
_MARKDOWN_ACTIVE = frozenset("\\`*_[]<>#|~$")


def sweep_source(run: dict, cpu: bool = False) -> str:
    """Where a sweep's points came from, for a caption: "all read from the store", or "N
    computed on BACKEND (W workers[, CPU s]), M read from the store" (``run``: the runner's
    summary, :meth:`analytics.sweep.runner.SweepResult.summary`; ``cpu`` adds the tasks' CPU seconds)."""
    if run["backend"] == "store":
        return "all read from the store"
    spent = f", {run['task_cpu_s']:,.1f} s CPU" if cpu else ""
    return (f"{run['computed']} computed on {plain(run['backend'])} ({run['workers']} workers"
            f"{spent}), {run['cached']} read from the store")


def plain(text: object) -> str:
    """``text`` with Markdown and HTML made inert (backslash-escaped), for user-supplied strings
    (file, dataset and model names, cell values echoed in messages) shown in Markdown widgets."""
    out = []
    for ch in str(text):
        out.append("\\" + ch if ch in _MARKDOWN_ACTIVE else ch)
    return "".join(out)


#: Ingest statuses in the order the summary line counts them, with the words it uses.
INGEST_STATUSES = {"ingested": "ingested", "appended": "appended", "attached": "attached",
                   "refreshed": "refreshed", "duplicate": "duplicate",
                   "skipped": "skipped by design", "rejected": "rejected"}
#: statuses counted only when some file has them
_RARE_STATUSES = ("appended", "attached", "refreshed")


def ingest_summary(report: list[dict]) -> str:
    """``"N ingested, N duplicate, N skipped by design, N rejected"`` for an ingest report
    (``N appended`` too when a file was appended to a dataset)."""
    return ", ".join(f"{sum(r['status'] == s for r in report)} {words}"
                     for s, words in INGEST_STATUSES.items()
                     if s not in _RARE_STATUSES or any(r["status"] == s for r in report))


def attached_state(att: dict) -> None:
    """An attached dataset's files against what was validated (:func:`analytics.store.
    attached_status`): what it reads, when it was checked, files changed or new. Plain text."""
    st.caption(f"Attached, read in place: {att['files']:,} {att['form']} files "
               f"({att['bytes'] / 1e6:,.1f} MB) matching {plain(att['pattern'])}, checked "
               f"{att['validated_at'][:19].replace('T', ' ')} UTC. Attach more with headroom "
               "attach (an operator command: a page never names a server path).")
    if att["changed"]:
        st.warning(f"{len(att['changed']):,} of its files changed since they were checked "
                   f"({plain('; '.join(att['changed'][:3]))}): its views stop until it is "
                   "refreshed.")
    if att["new"]:
        st.info(f"{len(att['new']):,} new files match its pattern (not read until a refresh): "
                f"{plain(', '.join(att['new'][:3]))}")


def ingest_report(report: list[dict]) -> None:
    """Show an ingest report: counts by status (:func:`ingest_summary`), one line per file
    (a folded table beyond five files, with the error or skip reason), and every warning in a
    table (file, column, lines, rows, message), grouped and counted as the parser grouped them.
    Names and errors are shown as plain text."""
    st.markdown(f"**Ingest: {ingest_summary(report)}** of {len(report)} file(s).")
    rejected = sum(r["status"] == "rejected" for r in report)
    rows = []
    if len(report) > 5:  # a first-run bootstrap: one table, not a box per file
        with st.expander(f"{len(report)} files", expanded=rejected > 0):
            st.dataframe([{"file": r["file"], "status": r["status"], "dataset": r.get("dataset"),
                           "format": r.get("format"), "rows": r.get("rows"),
                           "why": r.get("error") or r.get("reason") or r.get("hint")}
                          for r in report],
                         hide_index=True, width="stretch", key="ingest_files")
    for r in report:
        rows += [{"file": r["file"], "column": w.get("column"),
                  "lines": ", ".join(map(str, w.get("lines") or [])),
                  "rows": w.get("count"), "warning": w.get("message")}
                 for w in r.get("warnings", [])]
        if len(report) > 5:
            continue
        if r["status"] == "rejected":
            st.error(f"{plain(r['file'])} rejected: {plain(r['error'])}")
        elif r["status"] == "skipped":
            st.info(f"{plain(r['file'])}: skipped by design, nothing added: {plain(r['reason'])}")
        elif r["status"] == "duplicate" and r.get("site_alias"):
            a = r["site_alias"]
            st.info(f"{plain(r['file'])}: same bytes as dataset {plain(r['dataset'])} (site "
                    f"{plain(a['site'])}); no rows added, and site {plain(a['alias'])} now names "
                    "the same series (Dispatch offers both codes).")
        elif r["status"] == "duplicate":
            st.info(f"{plain(r['file'])}: same bytes as dataset {plain(r['dataset'])}; nothing "
                    "added. Delete that dataset first to ingest the file with other options.")
        elif r["status"] in ("attached", "refreshed"):
            st.success(f"{plain(r['file'])} \u2192 dataset {plain(r['dataset'])} {r['status']}, "
                       f"read in place: {r['files']:,} files, {r['rows']:,} rows, never copied "
                       "into the store")
        elif r["status"] == "appended":
            st.success(f"{plain(r['file'])} \u2192 {r['rows']:,} more rows of dataset "
                       f"{plain(r['dataset'])} ({r['format']}; {r['dropped']:,} already stored, "
                       "dropped)")
        else:
            st.success(f"{plain(r['file'])} \u2192 dataset {plain(r['dataset'])} "
                       f"({r['format']}, {r['rows']:,} rows, table {r.get('table')})")
            if r.get("ts_min"):
                st.caption(f"time span {r['ts_min']} to {r['ts_max']} (UTC)")
        if r["status"] in ("ingested", "appended"):
            provenance(r.get("sources") or {}, r.get("assumptions") or [],
                       key=f"ingest_sources_{report.index(r)}")
    if rows:  # a first run's dozens of notes stay folded; a few are shown
        with st.expander(f"{len(rows)} warning(s), with line and column",
                         expanded=len(rows) <= 10):
            st.dataframe(rows, hide_index=True, width="stretch", key="ingest_warnings",
                         column_config={"rows": st.column_config.NumberColumn(format="%d")})


def provenance(sources: dict[str, str], assumptions: list[str], key: str) -> None:
    """What a reader assumed (each sentence shown, plain text) and, folded, the file column
    each stored field came from (issue 27: the ingest report and the Data page's summary)."""
    for sentence in assumptions:
        st.caption(f"Assumed: {plain(sentence)}")
    if sources:
        with st.expander(f"Where the {len(sources)} stored fields came from"):
            st.dataframe([{"field": f, "from (the file's column)": c}
                          for f, c in sources.items()],
                         hide_index=True, width="stretch", key=key)


def energy_text(joules: float) -> str:
    """Energy in the unit a reader uses: J below 1 kJ, kJ below 1 kWh, kWh below 1 MWh, then MWh.

    >>> energy_text(720.0), energy_text(63_000.0), energy_text(5.4e6), energy_text(7.2e9)
    ('720 J', '63.0 kJ', '1.50 kWh', '2.00 MWh')
    """
    if abs(joules) < 1e3:
        return f"{joules:,.0f} J"
    if abs(joules) < 3.6e6:
        return f"{joules / 1e3:,.1f} kJ"
    if abs(joules) < 3.6e9:
        return f"{joules / 3.6e6:,.2f} kWh"
    return f"{joules / 3.6e9:,.2f} MWh"


def power_text(watts: float) -> str:
    """Power as W below 1 kW, then kW, then MW.

    >>> power_text(413.7), power_text(2500.0)
    ('414 W', '2.50 kW')
    """
    if abs(watts) < 1e3:
        return f"{watts:,.0f} W"
    if abs(watts) < 1e6:
        return f"{watts / 1e3:,.2f} kW"
    return f"{watts / 1e6:,.2f} MW"


def under_coverage(interval_metrics, alpha: float, n_test: int, z: float = 2.0) -> list[str]:
    """One warning per interval method whose measured coverage is below nominal by more than
    ``z`` binomial standard errors on ``n_test`` bins, and at least 5 points (issue 31 item 9: a
    41 % coverage at 90 % nominal was shown without a word). ``interval_metrics``: the
    envelope's table (``method``, ``coverage``)."""
    nominal = 1.0 - alpha
    se = (nominal * alpha / max(n_test, 1)) ** 0.5
    out = []
    for r in interval_metrics.itertuples():
        if r.coverage == r.coverage and nominal - r.coverage > max(z * se, 0.05):
            label = charts_label(r.method)
            out.append(f"{label} under-covers: {r.coverage:.1%} of the {n_test:,} test bins at "
                       f"{nominal:.0%} nominal ({(nominal - r.coverage) * 100:.1f} points below, "
                       f"more than {z:g} standard errors): its intervals are not calibrated "
                       "on this series; use one that covers (split, rolling or ACI).")
    return out


def charts_label(method: str) -> str:
    """The label the charts give an interval method (``charts.METHOD_LABELS``)."""
    from analytics.ui.charts import METHOD_LABELS

    return METHOD_LABELS.get(method, method)


def most_useful_demand(results: list[dict], order: list[str] | None = None) -> str | None:
    """Of the datasets an ingest added, the demand dataset (requests or a demand series) to
    select in the sidebar after an upload: the first of them in ``order`` (the store's demand
    datasets, best first: :func:`analytics.services.data.demand_order`) when given, else the
    one that spans the longest time; None when the ingest added no demand dataset."""
    added = [r["dataset"] for r in results if r.get("status") == "ingested"
             and r.get("table") in ("requests", "demand_series")]
    if order is not None and (ranked := [n for n in order if n in added]):
        return ranked[0]
    spans = []
    for r in results:
        if r.get("status") == "ingested" and r.get("table") in ("requests", "demand_series"):
            span = (_when(r.get("ts_max")) - _when(r.get("ts_min"))).total_seconds() \
                if r.get("ts_min") and r.get("ts_max") else 0.0
            spans.append((span, r.get("rows") or 0, r["dataset"]))
    return max(spans)[2] if spans else None


def _when(iso: str) -> datetime:
    return datetime.fromisoformat(iso)


def stop() -> None:
    """What a page calls instead of ``st.stop()``: :func:`analytics.ui.scenario.stop` writes the
    page's link and keeps its inputs first (imported on use: scenario imports this module)."""
    from analytics.ui import scenario

    scenario.stop()
