"""Data: upload traces, pull public datasets, see and manage what is in the store."""

import functools
from datetime import UTC, datetime, time

import streamlit as st
from analytics.config import CARBON_BASES, DEFAULT_T0, ParseOptions, field_list, time_zones
from analytics.ui import bigupload, cache, scenario, widgets

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Data")

report = st.session_state.pop("ingest_report", None)
if report:
    widgets.ingest_report(report)
if flash := st.session_state.pop("flash", None):
    st.success(flash)

ledger = cache.datasets()


def summary_rows(name: str) -> int:
    """Rows of a dataset, from the ledger."""
    return int(ledger.loc[ledger["name"] == name, "rows"].iloc[0])

if ledger.empty:
    st.info(
        "**No data yet.** headroom works on real traces. Get some by:\n"
        "- uploading files below (BurstGPT, Azure LLM, Mooncake, carbon, weather, prices, or a "
        "canonical CSV / Parquet),\n"
        "- pulling an official public dataset below or with `headroom pull NAME`,\n"
        "- putting files in the data folder (`data/raw/` or `$HEADROOM_DATA_DIR`) and restarting.\n\n"
        "Offline with nothing to load? Try the synthetic demo: generated (not measured) "
        "requests, carbon intensity at three made-up sites, batch jobs, a roofline-model "
        "benchmark grid and GPU telemetry, so every page has something to show; it is "
        "labelled synthetic on every chart, and deleting its datasets removes it."
    )
    if st.button("Load synthetic demo", key="demo"):
        with st.spinner("Generating the synthetic demo ..."):
            st.session_state["ingest_report"] = cache.add_synthetic_demo()
        st.session_state["pending_dataset"] = st.session_state["ingest_report"][0]["dataset"]
        st.rerun()

st.subheader("Upload")
NEW = "new datasets (one per file)"
growable = cache.dataset_names(cache.APPENDABLE_KINDS)
add_as = st.selectbox(
    "Add the files as", [NEW, *(f"more rows of {name}" for name in growable)], key="append_to",
    persist_state="session",
    help="A file appended to a dataset joins it in one transaction: rows already stored "
         "(the same values within the file's time span) are dropped and counted, a row whose "
         "key (site and hour, GPU and sample, job) is stored with other values refuses the "
         "file, and a file already ingested is a duplicate. Every chart and envelope of the "
         "dataset then includes the new rows.")
append_to = None if add_as == NEW else add_as.removeprefix("more rows of ")
plain_mb = bigupload.plain_cap_mb()
st.caption(f"Files up to {plain_mb} MB: the uploader below. Larger ones (up to "
           f"{bigupload.cap_mb()} MB): 'Large files (streamed to disk)' further down, which "
           "writes them to disk as they arrive; this one holds each file in server memory.")
uploads = st.file_uploader(
    "Traces, carbon, weather, prices or GPU telemetry (.csv, .csv.gz, .jsonl(.gz), .json.gz, "
    ".epw(.gz), .parquet, DCGM .prom/.txt)",
    accept_multiple_files=True, max_upload_size=plain_mb,
    # spreadsheets too, so that the refusal is headroom's and says what to do ("save as CSV")
    type=["csv", "gz", "jsonl", "json", "epw", "parquet", "prom", "txt", "xlsx", "xls", "ods"],
    key="uploads" if not st.session_state.get("upload_round") else
        f"uploads_{st.session_state['upload_round']}",  # a new key after each ingest: cleared
)
with st.expander("Parse options"):
    day0 = st.date_input("Start date for relative timestamps (BurstGPT, Mooncake)",
                         value=DEFAULT_T0.date(), key="t0_date", persist_state="session")
    st.caption("BurstGPT counts seconds from 0:00 of its first day and publishes no dates, so "
               "weekdays are **relative** to this date (default: a Monday).")
    site = st.text_input("Site (carbon / weather / prices) or host (telemetry); default from "
                         "the file name",
                         key="site", persist_state="session") or None
    year = st.number_input("Year for typical-year (EPW) weather", 1990, 2100, 2022, key="year",
                           persist_state="session")
    smi_fields = st.text_input(
        "nvidia-smi fields (logs written with --format=csv,noheader)", key="smi_fields",
        persist_state="session",
        placeholder="timestamp,index,power.draw,utilization.gpu,memory.used")
    st.caption("A header-less nvidia-smi log needs the --query-gpu list it was written with, "
               "in order; leave empty when the log has a header.")
    carbon_basis = st.selectbox(
        "Carbon basis (Electricity Maps / Green-DCC files)", list(CARBON_BASES),
        key="carbon_basis", persist_state="session",
        help="all: every basis in the file, one row per hour and basis; LCA: life-cycle only; "
             "direct: combustion only")
    no_zone = "none: read as UTC"
    zone = st.selectbox(
        "Time zone of local times (sacct, nvidia-smi, ... write the host's clock, no offset)",
        [no_zone, *time_zones()], key="tz", persist_state="session",
        help="IANA zone the files' times were written in, e.g. America/New_York. They are "
             "converted to UTC; a time in the hour repeated when clocks go back, or skipped when "
             "they go forward, is resolved by a stated rule and named in the ingest report. "
             "Times that carry an offset keep it; UTC formats ignore the zone.")
    bench_hw = st.text_input(
        "GPU of serving benchmarks that do not name one (SGLang bench_serving .jsonl, vllm "
        "bench without --metadata), e.g. H100", key="bench_hardware", persist_state="session").strip() or None
    b1, b2 = st.columns(2)
    bench_tp = b1.number_input("Tensor parallel (tp) of those runs", 1, 64, 1, key="bench_tp",
                               persist_state="session")
    bench_prec = b2.selectbox("Precision of those runs", ["bf16", "fp16", "fp8", "int8", "int4"],
                              key="bench_precision", persist_state="session")
    scrape_s = st.number_input(
        "Seconds between appended DCGM scrapes without timestamps (0: refuse such a file)",
        0.0, 86400.0, 0.0, key="scrape_interval_s", persist_state="session",
        help="A file made by `curl .../metrics >> file` every N s holds several scrapes and no "
             "times: scrape k is placed at the start date + k x N s, stated in the report.")


def parse_options() -> ParseOptions:
    """The parse options set above."""
    return ParseOptions(t0=datetime.combine(day0, time(), tzinfo=UTC), site=site, year=int(year),
                        t0_given=day0 != DEFAULT_T0.date(),
                        fields=field_list(smi_fields), carbon_basis=carbon_basis,
                        tz=None if zone == no_zone else zone, hardware=bench_hw,
                        tp=int(bench_tp) if bench_hw else None,
                        precision=bench_prec if bench_hw else None,
                        scrape_interval_s=float(scrape_s) or None)


def show_results(results: list[dict]) -> None:
    """Keep the ingest report for the next run, pick the added demand dataset, rerun."""
    st.session_state["ingest_report"] = results
    # select the added demand dataset with the longest span (not simply the last file)
    if chosen := widgets.most_useful_demand(results, cache.demand_order()):
        st.session_state["pending_dataset"] = chosen
    st.rerun()


if st.button("Ingest uploaded files", key="ingest", disabled=not uploads, type="primary"):
    with st.status(f"Ingesting {len(uploads)} file(s) ...") as status:
        results = cache.ingest_uploads(uploads, parse_options(), append_to)
        status.update(label="Ingest finished", state="complete")
    if not any(r["status"] == "rejected" for r in results):  # all in: clear the uploader
        st.session_state["upload_round"] = st.session_state.get("upload_round", 0) + 1
    show_results(results)

st.markdown("**Large files (streamed to disk)**")
st.caption("Files chosen here are sent straight to a file on the server as they upload "
           "(server memory does not grow with the file; up to the upload cap) and ingested "
           "as soon as they have arrived, with the parse options above.")
staged, refused = bigupload.large_uploader("large_uploads")
if staged or refused:
    with st.status(f"Ingesting {len(staged)} file(s) ...") as status:
        results = cache.ingest_staged(staged, parse_options(), append_to) if staged else []
        status.update(label="Ingest finished", state="complete")
    show_results(results + [{"file": r["name"], "status": "rejected", "error": r["error"],
                             "dataset": None, "rows": 0, "format": None} for r in refused])

st.subheader("Datasets")
st.caption("Request logs too large to copy can stay where they are: an operator attaches them "
           "in place with headroom attach NAME 'logs/date=*/*.parquet' (Parquet or CSV files, "
           "hive partitions); they are listed here and refreshed from this page.")
if not ledger.empty:
    st.dataframe(
        ledger.drop(columns=["dataset_id", "sha256"]),  # the hash is in every report
        hide_index=True,
        width="stretch",
        column_config={
            "rows": st.column_config.NumberColumn(format="%d"),
            "resolution_s": st.column_config.NumberColumn("resolution (s)"),
            "source_tz": st.column_config.TextColumn(
                "time zone", help="zone the local times were converted from (empty: UTC)"),
            "synthetic": st.column_config.CheckboxColumn(),
        },
        key="ledger",
    )
    left, right = st.columns(2)
    with left:
        target = st.selectbox("Dataset", ledger["name"].tolist(), key="manage_dataset",
                              persist_state="session")
        summary = cache.dataset_summary(target)
        st.dataframe([{"what": k.replace("_", " "), "value": str(v)} for k, v in summary.items()
                      if k not in ("dataset", "kind", "sources", "assumptions")
                      and v is not None],
                     hide_index=True, width="stretch", key="dataset_summary")
        widgets.provenance(summary.get("sources") or {}, summary.get("assumptions") or [],
                           key="dataset_sources")
        if (att := summary.get("attached")) is not None:
            widgets.attached_state(att)
            if st.button(f"Refresh {target}", key="refresh_attached",
                         help="check the files again (new files under the pattern are taken "
                              "in) and recompute every view of this dataset"):
                st.session_state["ingest_report"] = [cache.refresh_attached(target)]
                st.rerun()
        fmt = st.radio("Download as", ["csv", "parquet"], horizontal=True, key="export_fmt",
                       persist_state="session")
        if (too_large := cache.export_refusal(target)) is not None:
            st.caption(widgets.plain(too_large))
        else:
            st.download_button(
                f"Download {target}.{fmt}",
                data=functools.partial(cache.export_table, target, fmt),  # built on the click
                file_name=f"{target}.{fmt}",
                mime="text/csv" if fmt == "csv" else "application/octet-stream",
                key="download",
            )
    with right:
        st.write("")
        if st.session_state.get("confirm_delete") != target:
            if st.button(f"Delete {target}", key="delete"):
                st.session_state["confirm_delete"] = target
                st.rerun()
        else:
            st.warning(f"Delete {widgets.plain(target)} and its {summary_rows(target):,} rows? "
                       "This cannot be undone (ingest the file again to get it back).")
            yes, no = st.columns(2)
            if yes.button("Yes, delete", key="delete_confirm", type="primary"):
                cache.delete_dataset(target)
                st.session_state.pop("confirm_delete", None)
                st.session_state["flash"] = f"Deleted dataset {widgets.plain(target)}."
                st.rerun()
            if no.button("Cancel", key="delete_cancel"):
                st.session_state.pop("confirm_delete", None)
                st.rerun()
else:
    st.caption("The store is empty.")

st.subheader("Pull a public dataset")
registry = cache.registry()
choice = st.selectbox("Dataset", [r["name"] for r in registry], key="pull_name", persist_state="session")
entry = next(r for r in registry if r["name"] == choice)
st.caption(f"{entry['file']} - {entry['licence']} - cite: {entry['citation']} - "
           f"{entry['checksum']}")
if st.button("Pull and ingest", key="pull"):
    bar = st.progress(0.0, text=f"Downloading {choice} ...")

    def on_progress(done: int, total: int | None) -> None:
        if total:
            bar.progress(min(done / total, 1.0), text=f"{done / 1e6:.1f} / {total / 1e6:.1f} MB")

    try:
        st.session_state["ingest_report"] = cache.pull_and_ingest(choice, on_progress)
        st.rerun()
    except Exception as exc:  # network, checksum or format: shown, the page keeps running
        bar.empty()  # a download's message without this server's paths
        st.error(f"Pull of {choice} failed: {widgets.plain(getattr(exc, 'public', exc))}")

runs = cache.sweep_ledger()
if runs:  # issue 31 item 11: the stored sweeps have their own page
    st.caption(f"{sum(r['tasks'] for r in runs):,} sweep points are kept in the store "
               f"({len(runs)} sweeps): open, compare or delete them on the Sweeps page.")
    st.page_link("pages/sweeps.py", label="Sweeps", icon=":material/stacked_line_chart:")
