"""Progress of long page work, by stage, with a Cancel (issue 19 item 5).

:class:`Progress` is a ``callable(done, total[, label])`` that a service reports to after each
step; it draws one ``st.progress`` bar saying "n of N", the time elapsed and an estimate of the
time left (elapsed / done x steps left), and a Cancel button beside it. Streamlit stops a run at
its next ``st`` call when a widget is clicked, so Cancel takes effect at the next step: its
callback runs first and records the cancel under ``key``, so the page does not start the same
work again until it is asked to (:meth:`cancelled`). Results already computed stay in the cache.
"""

from __future__ import annotations

import time

import streamlit as st


class Progress:
    """A progress bar with elapsed time, ETA and a Cancel button.

    Args:
        what: what is running, e.g. ``"Sensitivity sweep"``.
        key: identifies the work (Cancel's session-state flag, the button's key).

    The bar and the button live in one placeholder: :meth:`close` empties both, so no Cancel
    is left beside a finished result (issue 31 item 1: a leftover button discarded it). The
    estimate of the time left counts only the points computed since the first report: the
    points a first report already counts came from the store (a cached sweep), and are shown
    as such, not as work done at the measured speed (issue 31 item 4).
    """

    def __init__(self, what: str, key: str):
        self.what, self.key = what, key
        self.t0 = time.monotonic()
        self.base: int | None = None  # points done at the first report (read, not computed)
        self.t_base = self.t0
        self.slot = st.empty()
        with self.slot.container():
            c1, c2 = st.columns([6, 1])
            self.bar = c1.progress(0.0, text=f"{what}: starting ...")
            self.button = c2.button("Cancel", key=f"{key}_cancel", on_click=self._cancel)

    def _cancel(self) -> None:
        st.session_state[f"{self.key}_cancelled"] = True

    @staticmethod
    def cancelled(key: str) -> bool:
        """True (once) when the work ``key`` was cancelled on the last run; clears the flag."""
        return bool(st.session_state.pop(f"{key}_cancelled", False))

    def text(self, done: int, total: int, label: str = "") -> str:
        """"<what>: n of N (<label>; k read from the store), <s> s elapsed, about <s> s left":
        the time left from the rate of the points computed since the first report."""
        now = time.monotonic()
        if self.base is None:
            self.base, self.t_base = done, now
        computed = done - self.base
        left = ((now - self.t_base) / computed * (total - done)) if computed > 0 else None
        eta = f", about {left:,.0f} s left" if left is not None else ""
        notes = [n for n in (label, f"{self.base} read from the store" if self.base else "") if n]
        return (f"{self.what}: {done} of {total}" + (f" ({'; '.join(notes)})" if notes else "")
                + f", {now - self.t0:,.0f} s elapsed{eta}")

    def __call__(self, done: int, total: int, label: str = "") -> None:
        self.bar.progress(min(done / total, 1.0) if total else 1.0,
                          text=self.text(done, total, label))

    def close(self) -> None:
        """Remove the bar and its Cancel button (the result is drawn in their place)."""
        self.slot.empty()


class LazyProgress:
    """A :class:`Progress` drawn at the first report only, so work served from a cache shows no
    bar; same call signature and Cancel."""

    cancelled = staticmethod(Progress.cancelled)

    def __init__(self, what: str, key: str):
        self.what, self.key, self.bar = what, key, None

    def __call__(self, done: int, total: int, label: str = "") -> None:
        if self.bar is None:
            self.bar = Progress(self.what, self.key)
        self.bar(done, total, label)

    def close(self) -> None:
        """Remove the bar, if one was drawn."""
        if self.bar is not None:
            self.bar.close()


def on_demand(key: str, button: str, what: str, run_key, cancelled_note: str, compute):
    """Long page work the user starts with a button, with a :class:`Progress` and Cancel.

    The button (``<key>_run``) records ``run_key`` (the inputs the work is for) under
    ``<key>_for``; while that matches, the work runs (cached by the service, so a rerun redraws)
    as ``compute(progress)``. A Cancel forgets the request and shows ``cancelled_note``. A
    ``ValueError`` (e.g. an unreachable Dask scheduler) is shown as "No <what>: ..." in plain
    text.

    Returns
    -------
    ``compute``'s result, or None (not asked for these inputs, cancelled, or refused).
    """
    from analytics.ui.widgets import plain

    if st.button(button, key=f"{key}_run"):
        st.session_state[f"{key}_for"] = run_key
    if Progress.cancelled(key):
        st.session_state.pop(f"{key}_for", None)
        st.info(cancelled_note)
    if st.session_state.get(f"{key}_for") != run_key:
        return None
    bar = Progress(what, key)
    try:
        return compute(bar)
    except ValueError as exc:
        st.error(f"No {what.lower()}: {plain(exc)}")
        return None
    finally:
        bar.close()
