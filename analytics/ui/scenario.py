"""Share links and named scenarios (issue 19 item 13).

A page's scenario is the set of ``st.session_state`` values its result depends on: the sidebar
dataset, the shared envelope settings and the page's own widgets (:data:`LINKED`). After every
run, also one that stopped early (:func:`stop`), the app writes exactly them to the URL
(:func:`publish`), so the address bar is a link that reopens the scenario shown; a page's
widgets keep their values across page visits by Streamlit's ``persist_state="session"``
(issue 31 item 2); a fresh session opened on such a link applies them before any widget is drawn
(:func:`restore`). A value that does not parse or is out of its widget's range is not applied and
is named in a warning (:func:`restore` returns the problems), never an exception.

Named scenarios are the same dictionaries saved in the store (``scenarios`` table) and applied
with :func:`apply` from a button callback.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from analytics.config import BIN_CHOICES_S
from analytics.envelope.forecast import AUTO, LEARNED
from analytics.ui.widgets import ALPHAS, SPLITS


@dataclass(frozen=True)
class Spec:
    """How one linked value is read back from text: ``parse`` (str -> value) and either the
    allowed ``options`` or an inclusive ``(lo, hi)`` range."""

    parse: Callable[[str], object]
    options: tuple = ()
    lo: float | None = None
    hi: float | None = None

    def read(self, raw: str) -> object:
        """The value of ``raw``; raises ValueError naming what is allowed."""
        try:
            value = self.parse(raw)
        except ValueError:
            value = None
        if self.options and value not in self.options:
            raise ValueError("one of " + ", ".join(map(str, self.options)))
        if self.lo is not None and (value is None or not (self.lo <= value <= self.hi)):
            raise ValueError(f"between {self.lo:g} and {self.hi:g}")
        if value is None:
            raise ValueError({_bool: "true or false"}.get(self.parse, self.parse.__name__))
        return value


def _bool(raw: str) -> bool:
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise ValueError("true or false")


#: Settings shared by the envelope pages (``widgets.envelope_controls``, ``widgets.shared_bin``).
ENVELOPE: dict[str, Spec] = {
    "dataset": Spec(str),
    "envelope_bin": Spec(str, tuple(BIN_CHOICES_S)),
    "envelope_alpha": Spec(float, tuple(ALPHAS)),
    "envelope_horizon": Spec(int, lo=1, hi=288),
    "envelope_base_model": Spec(str, (*LEARNED, AUTO)),
    "envelope_split": Spec(str, SPLITS),
}

#: The values each page's link carries, by the page's URL path.
LINKED: dict[str, dict[str, Spec]] = {
    "demand": {**ENVELOPE, "w_prompt": Spec(float, lo=0, hi=100),
               "w_completion": Spec(float, lo=0, hi=100), "with_failed": Spec(_bool)},
    "coverage": dict(ENVELOPE),
    "capacity": {**ENVELOPE,
                 "target_violation": Spec(float, lo=0.01, hi=0.30),
                 "delta": Spec(float, (0.01, 0.05, 0.1, 0.2)),
                 "scale": Spec(int, (1, 10, 100, 1000, 10000)),
                 "objective": Spec(str, ("cost", "power", "carbon")),
                 "gco2": Spec(float, lo=0, hi=2000),
                 "utilisation": Spec(float, lo=0.1, hi=1.0)},
    "dispatch": {**ENVELOPE,
                 "max_share": Spec(float, lo=0.1, hi=1.0),
                 "dispatch_scale": Spec(int, (1, 10, 100, 1000, 10000)),
                 "offset_days": Spec(int, lo=-180, hi=180),
                 "basis": Spec(str, ("auto", "avg", "LCA", "direct")),
                 "dispatch_util": Spec(float, lo=0.1, hi=1.0), "home": Spec(str),
                 "fill_missing": Spec(str, ("refuse and name them", "forward fill",
                                            "interpolate")),
                 "dispatched": Spec(str, ("provisioned capacity (overbooking factor x "
                                          "rolling band)",
                                          "envelope upper bound (no overbooking)")),
                 "dispatch_violation": Spec(float, lo=0.01, hi=0.30),
                 "dispatch_delta": Spec(float, (0.01, 0.05, 0.1, 0.2))},
    "power": {"power_jobs": Spec(str), "power_inference": Spec(str),
              "power_share": Spec(float, lo=0.0, hi=1.0),
              "power_util": Spec(float, (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)),
              "power_ckpt": Spec(str, ("15 min", "60 min", "240 min", "none")),
              "power_sched": Spec(str, ("fcfs", "swf")), "power_capped": Spec(_bool),
              "power_gpus": Spec(int, lo=16, hi=2048), "power_days": Spec(int, lo=1, hi=28),
              "power_speed": Spec(str, ("F", "M", "S")),
              "power_seed": Spec(int, lo=0, hi=10_000)},
    # issue 31 item 3: every page's scenario is in its link (the widgets' own ranges)
    "serving": {"serving_trace": Spec(str), "serving_gpu": Spec(str),
                "serving_gpus": Spec(int, lo=1, hi=64), "serving_models": Spec(int, lo=1, hi=64),
                "serving_ttft": Spec(int, lo=10, hi=60_000),
                "serving_tbt": Spec(int, lo=1, hi=5_000),
                "safety_margin": Spec(float, lo=0.0, hi=0.5),
                "serving_window": Spec(int, lo=0, hi=24 * 60),
                "serving_seed": Spec(int, lo=0, hi=10_000),
                "serving_predictor": Spec(str, ("oracle", "quantile")),
                "serving_target": Spec(float, lo=0.5, hi=1.0)},
    "placement": {"adv_model": Spec(str), "adv_task": Spec(str),
                  "adv_conc": Spec(int, lo=1, hi=8192), "adv_in": Spec(int, lo=1, hi=200_000),
                  "adv_out": Spec(int, lo=1, hi=100_000),
                  "adv_ttft": Spec(int, lo=0, hi=120_000), "adv_itl": Spec(int, lo=0, hi=10_000),
                  "adv_value": Spec(float, lo=0.0, hi=1e-3)},
    "telemetry": {"telemetry_dataset": Spec(str), "telemetry_metric": Spec(str)},
    "leaderboard": {"lb_model": Spec(str), "lb_axis": Spec(str, ("energy_per_token_j",
                                                                  "usd_per_1m_tokens")),
                    "lb_conc": Spec(int, lo=1, hi=8192)},
    "fleet": {"dataset": Spec(str), "envelope_bin": Spec(str, tuple(BIN_CHOICES_S)),
              "fleet_model": Spec(str),
              **{f"slo_{k}": Spec(float, lo=0, hi=1e6) for k in (
                  "ttft_p90_ms", "ttft_p99_ms", "itl_p90_ms", "itl_p99_ms", "tpot_p99_ms",
                  "latency_p99_s")},
              "fleet_risk": Spec(float, lo=0.01, hi=0.30),
              "fleet_cap_risk": Spec(float, (0.0, 0.01, 0.02, 0.05, 0.1)),
              "fleet_delta": Spec(float, (0.01, 0.05, 0.1, 0.2)),
              "fleet_scale": Spec(int, (1, 10, 30, 100, 300, 1000, 10000)),
              "fleet_min": Spec(int, lo=0, hi=1000), "fleet_share": Spec(float, lo=0.01, hi=1.0),
              "fleet_share_from": Spec(str), "fleet_gco2": Spec(float, lo=0, hi=2000),
              "fleet_site": Spec(str),
              "fleet_pue": Spec(float, lo=1.0, hi=3.0)},
}


#: Widget keys that show the shared envelope values on each page (``widgets.envelope_controls``
#: prefixes, the page's bin selector): dropped when a scenario is applied, so they redraw from it.
_ENVELOPE_WIDGETS = {page: (f"{page}_alpha", f"{page}_horizon", f"{page}_base", f"{page}_split",
                            "bin" if page == "demand" else f"{page}_bin")
                     for page in ("demand", "coverage", "capacity", "dispatch")}
_ENVELOPE_WIDGETS["fleet"] = ("fleet_bin",)


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def current(page: str) -> dict:
    """The linked values of ``page`` now in the session (only those set)."""
    return {k: st.session_state[k] for k in LINKED.get(page, {}) if st.session_state.get(k)
            is not None}


def typed(page: str, values: Mapping[str, object]) -> dict:
    """``values`` (e.g. a saved scenario's text) read with ``page``'s specs; unknown keys are
    dropped. Raises ValueError naming the first value that does not read."""
    specs = LINKED.get(page, {})
    out = {}
    for key, raw in values.items():
        if key in specs:
            try:
                out[key] = specs[key].read(_text(raw))
            except ValueError as exc:
                raise ValueError(f"{key}={str(raw)[:40]!r}: it must be {exc}") from None
    return out


def apply(page: str, values: Mapping[str, object]) -> list[str]:
    """Put ``values`` (text or typed) into the session for ``page``; returns one sentence per
    value not applied (unknown key, unparsable or out of range). The dataset goes through the
    sidebar's ``pending_dataset`` (the sidebar checks it exists). Call before the widgets are
    drawn: on a fresh session or from a button callback."""
    specs = LINKED.get(page, {})
    for key in _ENVELOPE_WIDGETS.get(page, ()):
        st.session_state.pop(key, None)
    problems = []
    for key, raw in values.items():
        if key not in specs:
            continue
        try:
            value = specs[key].read(_text(raw))
        except ValueError as exc:
            problems.append(f"{key}={str(raw)[:40]!r} is not used: it must be {exc}")
            continue
        st.session_state["pending_dataset" if key == "dataset" else key] = value
    return problems


def restore(page: str) -> list[str]:
    """On the first visit of ``page`` in this session, apply the URL's query parameters
    (:func:`apply`); returns the problems to show. Later runs leave the session alone."""
    flag = f"_linked_{page}"
    if page not in LINKED or st.session_state.get(flag):
        return []
    st.session_state[flag] = True
    return apply(page, {k: st.query_params[k] for k in st.query_params})


def publish(page: str) -> None:
    """Make the URL hold exactly ``page``'s linked values now in the session, whatever the run
    drew (issue 31 item 3: a page that stopped early, on a refusal or ``st.stop()``, left the
    previous scenario's values in the address bar): a value not set now is removed, one that
    changed is rewritten, and the URL is left alone when it already says the same."""
    want = {key: _text(value) for key, value in current(page).items()}
    if {k: st.query_params[k] for k in st.query_params} != want:
        st.query_params.from_dict(want)



# --------------------------------------------------------------------------- named scenarios
@st.cache_data(show_spinner=False, max_entries=16)
def _saved(db_path: str, stamp: tuple, page: str) -> list[dict]:
    from analytics import store
    from analytics.ui import cache

    with cache.connection() as con:
        return store.scenarios(con, page)


def saved(page: str) -> list[dict]:
    """Scenarios saved for ``page``, newest first (:func:`analytics.store.scenarios`); read
    again only when the store file changes (:func:`analytics.ui.cache.store_stamp`), so a page
    rerun opens no store connection."""
    from analytics.ui import cache

    path = cache.settings().db_path
    return _saved(str(path), cache.store_stamp(path), page)


def save_current(page: str) -> None:
    """Button callback: save ``page``'s current values under the name typed in the
    ``scenario_name`` field; the outcome goes to ``st.session_state["scenario_msg"]``."""
    from analytics import store
    from analytics.ui import cache

    name = st.session_state.get("scenario_name") or ""
    try:
        with cache.connection(write=True) as con:
            name = store.save_scenario(con, name, page, {k: _text(v) for k, v in
                                                         current(page).items()})
    except ValueError as exc:
        st.session_state["scenario_msg"] = ("error", str(exc))
    else:
        st.session_state["scenario_msg"] = ("success", f"Saved scenario {name}.")


def open_saved(page: str) -> None:
    """Button callback: apply the scenario chosen in ``scenario_open`` to ``page``."""
    name = st.session_state.get("scenario_open")
    chosen = next((s for s in saved(page) if s["name"] == name), None)
    if chosen is None:
        st.session_state["scenario_msg"] = ("error", f"No saved scenario {name}.")
        return
    problems = apply(page, chosen["params"])
    st.session_state["scenario_msg"] = (
        ("warning", "; ".join(problems)) if problems else ("success", f"Opened {name}."))


# --------------------------------------------------------------------------- deep links
#: True while app.py runs a page. A link to a page (``/capacity?...``) that reaches a freshly
#: started server before any session has run app.py is run by Streamlit as a bare page file
#: (the ``pages/`` folder's legacy mode), without the sidebar, the bootstrap or the link handling.
_IN_APP = contextvars.ContextVar("headroom_in_app", default=False)
#: The URL path of the page app.py is running, and whether its link is already written.
_PAGE: contextvars.ContextVar[list | None] = contextvars.ContextVar("headroom_page", default=None)


def run_page(page) -> None:
    """Run the navigation's chosen ``page`` (marking it as run by app.py), then write its link
    (:func:`publish`), however the page ended."""
    token = _IN_APP.set(True)
    state = [page.url_path, False]
    page_token = _PAGE.set(state)
    try:
        page.run()
    finally:
        _IN_APP.reset(token)
        _PAGE.reset(page_token)
        if not state[1]:  # not already done by stop(): a normal end or an exception
            publish(page.url_path)


def stop() -> None:
    """``st.stop()`` for pages: first :func:`publish` the page's link (after ``st.stop()`` no
    Streamlit call runs, so a ``finally`` cannot write it: issue 31 item 3), then stop."""
    state = _PAGE.get()
    if state is not None and not state[1]:
        state[1] = True
        publish(state[0])
    st.stop()


def through_app(page_file: str) -> None:
    """First call of every page: a page run without app.py (a deep link on a fresh server)
    remembers which page and query parameters were asked for and hands over to app.py, which
    opens that page with them (:func:`follow_deep_link`)."""
    if _IN_APP.get():
        return
    st.session_state["_deep_link"] = (Path(page_file).stem, dict(st.query_params))
    st.switch_page("app.py")


def follow_deep_link(pages) -> None:
    """In app.py after ``st.navigation``: open the page a bare page run handed over, with its
    query parameters (``pages``: the navigation's page groups)."""
    link = st.session_state.pop("_deep_link", None)
    if link:
        target = next((p for group in pages.values() for p in group if p.url_path == link[0]),
                      None)
        if target is not None:
            st.switch_page(target, query_params=link[1])
