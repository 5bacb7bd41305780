"""headroom: demand envelopes, capacity decisions and power profiles for GPU clusters.

Run with ``make run`` (or ``streamlit run app.py``). Pages live in ``pages/``; this file sets up
the page, the shared sidebar (dataset picker, where sweeps run) and the first-run bootstrap.
"""

import logging
import uuid
from pathlib import Path

import streamlit as st

from analytics.ui import cache, cluster, scenario, widgets

HERE = Path(__file__).parent

# a local icon: an emoji or Material icon favicon is fetched from the internet on every page
st.set_page_config(page_title="headroom", page_icon=str(HERE / ".streamlit" / "icon.png"),
                   layout="wide")


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
    names = cache.demand_order()  # dense token traces first: the first one is the default
    pending = st.session_state.pop("pending_dataset", None)
    if pending in names:
        st.session_state["dataset"] = pending
    elif pending is not None:  # a link or a saved scenario names a dataset this store lacks
        st.warning(f"Dataset {widgets.plain(pending)} is not in this store; showing another.")
    with st.sidebar:
        if names:
            st.selectbox("Dataset", names, key="dataset",
                         help="Demand datasets (request traces and pre-binned series), the "
                              "best to start on first: dense token traces, then sparse or "
                              "GPU-seconds-only ones, longest span first")
            if len(st.session_state["dataset"]) > 24:  # the box cuts a long name: in full
                st.caption(widgets.plain(st.session_state["dataset"]))
            info = cache.dataset_info(st.session_state["dataset"])
            if info and info["synthetic"]:
                st.warning("Synthetic demo data - not measured traffic.")
        else:
            st.caption("No demand dataset yet: add one on the Data page.")
    cluster.sidebar()


def _page(file: str, title: str, icon: str, **kwargs) -> st.Page:
    return st.Page(str(HERE / "pages" / file), title=title, icon=icon, **kwargs)


#: The sidebar, grouped by the step of a planner's afternoon.
PAGES = {
    "Data": [_page("data.py", "Data", ":material/database:", default=True),
             _page("sweeps.py", "Sweeps", ":material/stacked_line_chart:")],
    "Envelope": [_page("demand.py", "Demand", ":material/show_chart:"),
                 _page("coverage.py", "Coverage", ":material/verified:")],
    "Decisions": [_page("capacity.py", "Capacity", ":material/dns:"),
                  _page("dispatch.py", "Dispatch", ":material/public:"),
                  _page("fleet.py", "Fleet plan", ":material/rocket_launch:")],
    "What-ifs": [_page("placement.py", "Placement", ":material/memory:"),
                 _page("leaderboard.py", "Leaderboard", ":material/leaderboard:"),
                 _page("power.py", "Power", ":material/electric_bolt:"),
                 _page("serving.py", "Serving", ":material/eco:")],
    "Telemetry": [_page("telemetry.py", "Telemetry", ":material/monitor_heart:"),
                  _page("live.py", "Live", ":material/sensors:")],
}


def _main() -> None:
    _first_run()
    page = st.navigation(PAGES, expanded=True)  # every page in view (14: over the default 12)
    scenario.follow_deep_link(PAGES)
    problems = scenario.restore(page.url_path)  # a shared link: before any widget is drawn
    _sidebar()
    for problem in problems:
        st.warning(f"Link: {widgets.plain(problem)}")
    scenario.run_page(page)  # then its link and its kept inputs, however it ended


try:
    _main()
except cache.StoreBusy as exc:  # the CLI or another program is writing: no traceback, no path
    logging.getLogger("headroom").warning("%s", exc)
    st.warning(exc.public)
except cache.StoreError as exc:  # not a headroom store, damaged, a full disk: what to do
    logging.getLogger("headroom").error("%s", exc)
    st.error(exc.public)
except Exception:  # st.stop / st.rerun are BaseExceptions and pass through
    if cache.settings().debug:
        raise
    error_id = uuid.uuid4().hex[:8]
    logging.getLogger("headroom").exception("page error, id %s", error_id)
    st.error(f"Something went wrong on this page (error id {error_id}). The details are in the "
             "server log under that id; try another setting or page, and report the id if it "
             "persists.")
