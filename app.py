"""headroom: demand envelopes, capacity decisions and power profiles for GPU clusters.

Run with ``make run`` (or ``streamlit run app.py``). Pages live in ``pages/``; this file sets up
the page, the shared sidebar (dataset picker) and the first-run bootstrap.
"""

import logging
import uuid
from pathlib import Path

import streamlit as st

from analytics.ui import cache

HERE = Path(__file__).parent

st.set_page_config(page_title="headroom", page_icon=":material/bolt:", layout="wide")


def _first_run() -> None:
    """On an empty store, ingest every recognised file in the data dir once per session."""
    if st.session_state.get("bootstrapped") or not cache.datasets().empty:
        return
    st.session_state["bootstrapped"] = True
    files = cache.recognised_files()
    if not files:
        return
    bar = st.progress(0.0, text="First run: ingesting files found in the data folder ...")

    def on_file(i: int, n: int, name: str) -> None:
        bar.progress(i / n, text=f"First run: ingesting {name} ({i + 1}/{n})")

    results = cache.bootstrap(on_file)
    bar.empty()
    st.session_state["ingest_report"] = results


def _sidebar() -> None:
    names = cache.dataset_names(cache.DEMAND_KINDS)
    pending = st.session_state.pop("pending_dataset", None)
    if pending in names:
        st.session_state["dataset"] = pending
    with st.sidebar:
        if names:
            st.selectbox("Dataset", names, key="dataset",
                         help="Demand datasets (request traces and pre-binned series)")
            info = cache.dataset_info(st.session_state["dataset"])
            if info and info["synthetic"]:
                st.warning("Synthetic demo data - not measured traffic.")
        else:
            st.caption("No demand dataset yet: add one on the Data page.")


PAGES = [
    st.Page(str(HERE / "pages" / "data.py"), title="Data", icon=":material/database:",
            default=True),
    st.Page(str(HERE / "pages" / "demand.py"), title="Demand", icon=":material/show_chart:"),
    st.Page(str(HERE / "pages" / "coverage.py"), title="Coverage", icon=":material/verified:"),
    st.Page(str(HERE / "pages" / "capacity.py"), title="Capacity", icon=":material/dns:"),
    st.Page(str(HERE / "pages" / "dispatch.py"), title="Dispatch", icon=":material/public:"),
    st.Page(str(HERE / "pages" / "placement.py"), title="Placement", icon=":material/memory:"),
    st.Page(str(HERE / "pages" / "power.py"), title="Power", icon=":material/electric_bolt:"),
    st.Page(str(HERE / "pages" / "serving.py"), title="Serving", icon=":material/eco:"),
    st.Page(str(HERE / "pages" / "telemetry.py"), title="Telemetry",
            icon=":material/monitor_heart:"),
]


def _main() -> None:
    _first_run()
    _sidebar()
    st.navigation(PAGES).run()


try:
    _main()
except cache.StoreBusy as exc:  # the CLI or another program is writing: say who, not a traceback
    st.warning(str(exc))
except Exception:  # st.stop / st.rerun are BaseExceptions and pass through
    if cache.settings().debug:
        raise
    error_id = uuid.uuid4().hex[:8]
    logging.getLogger("headroom").exception("page error, id %s", error_id)
    st.error(f"Something went wrong on this page (error id {error_id}). The details are in the "
             "server log under that id; try another setting or page, and report the id if it "
             "persists.")
