"""Live service: a model's demand read from the operator's Prometheus, binned like a trace, and
judged bin by bin against an envelope started from a stored history (``headroom live``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pandas as pd

from analytics.envelope import forecast
from analytics.live import bins as live_bins
from analytics.live.envelope import LiveEnvelope
from analytics.live.follow import Follower, LiveConfig
from analytics.live.source import PrometheusSource, SourceError
from analytics.services import demand

#: The longest window one call reads (a bounded route: 31 days of 5-minute bins are 8,928).
MAX_WINDOW = pd.Timedelta(days=31)


def _naive_utc(t) -> pd.Timestamp:
    """``t`` as a naive UTC Timestamp (an aware one converted)."""
    t = pd.Timestamp(t)
    return t.tz_convert("UTC").tz_localize(None) if t.tzinfo is not None else t


def _epoch_s(t: datetime) -> float:
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def history_of(con, history: str, bin_s: int, w_prompt: float = 1.0, w_completion: float = 1.0,
               start: datetime | None = None) -> tuple[pd.DataFrame, pd.Timestamp]:
    """``(bins, first live bin)``: the stored dataset ``history`` on the live bins (``ts``,
    ``target``: its bins before ``start``) and the bin the live series starts at (``start``,
    default the bin after the history's last). Raises ValueError when ``start`` does not follow
    the history's last bin, and store.UnknownDataset."""
    grid = demand.grid(con, demand.GridRequest(history, bin_s, w_prompt, w_completion))
    grid = grid[["ts", "target"]].copy()
    grid["ts"] = pd.to_datetime(grid["ts"])
    step = pd.Timedelta(seconds=bin_s)
    first_live = grid["ts"].iloc[-1] + step if start is None else pd.Timestamp(start)
    hist = grid[grid["ts"] < first_live]
    if hist.empty or hist["ts"].iloc[-1] + step != first_live:
        last = None if hist.empty else hist["ts"].iloc[-1]
        raise ValueError(f"the live window starts at {first_live}, but the history {history!r} "
                         f"ends with the bin at {last}: start it right after the history "
                         "(--from the bin after its last, or leave --from out)")
    return hist, first_live


def live_window(con, prometheus_url: str, model: str, history: str, start: datetime | None,
                end: datetime, engine: str = "vllm", bin_s: int = 300, alpha: float = 0.1,
                base_model: str = "hgb", k_above: int = 4, w_prompt: float = 1.0,
                w_completion: float = 1.0, timeout_s: float = 10.0) -> Iterator[dict]:
    """One record per bin of ``[start, end)`` (``start`` default: the bin after the history's
    last): ``ts``, ``model``, ``demand`` (the weighted-token target, w = ``w_prompt`` /
    ``w_completion``; None in a gap), ``prompt_tokens``, ``completion_tokens``, ``point``,
    ``lower``, ``upper``, ``alpha_t``, ``covered``, ``above``, ``alarm``, ``coverage_so_far``,
    ``samples``, ``resets``, ``gap_reason`` (:class:`analytics.live.envelope.LiveBin`).

    The envelope starts from the stored dataset ``history`` on the same bins (its bins before
    ``start``); the live window must begin right after them.

    Raises
    ------
    ValueError : the window does not follow the history, is empty or longer than
        :data:`MAX_WINDOW`, or the history is too short
    analytics.live.source.SourceError : Prometheus does not answer or answers garbage
    store.UnknownDataset : no dataset ``history``
    """
    hist, first_live = history_of(con, history, bin_s, w_prompt, w_completion, start)
    end_ts = pd.Timestamp(end)
    if end_ts <= first_live:
        raise ValueError(f"the window {first_live} to {end_ts} holds no bin")
    if end_ts - first_live > MAX_WINDOW:
        raise ValueError(f"the window {first_live} to {end_ts} is longer than "
                         f"{MAX_WINDOW.days} days: read it in parts of at most that")
    step = pd.Timedelta(seconds=bin_s)
    LiveEnvelope.split(hist, bin_s, alpha, k_above)  # a short history is refused first
    start_s, end_s = _epoch_s(first_live.to_pydatetime()), _epoch_s(end_ts.to_pydatetime())
    # The source is read before the fit, so a server that is down or answers garbage is refused
    # in the time of one request.
    series = PrometheusSource(prometheus_url, timeout_s).counters(
        engine, model, start_s - 2 * bin_s, end_s)  # a baseline sample before the window
    frame = live_bins.demand_bins(series, start_s, end_s, bin_s, w_prompt, w_completion)
    env = LiveEnvelope(hist, bin_s, alpha=alpha, base_model=base_model, k_above=k_above)
    with forecast.single_threaded():
        yield from bin_records(env, frame, first_live, end_ts, step, model)


def bin_records(env: LiveEnvelope, frame: pd.DataFrame, first_live, end_ts, step, model: str):
    """The records of :func:`live_window`, one envelope step per bin of ``frame`` in
    ``[first_live, end_ts)``."""
    for row in frame.itertuples(index=False):
        if row.ts < first_live or row.ts + step > end_ts:
            continue
        demand_v = None if row.gap else float(row.target)
        b = env.step(row.ts, demand_v, row.gap_reason)
        yield {**b.as_dict(), "model": model,
               "prompt_tokens": None if row.gap else float(row.prompt_tokens),
               "completion_tokens": None if row.gap else float(row.completion_tokens),
               "samples": int(row.samples), "resets": int(row.resets),
               "base_model": env.base_model}


def follower(db_path, prometheus_url: str, config: LiveConfig, name: str,
             start: datetime | None = None, timeout_s: float = 10.0,
             lag_s: float = 30.0, until: datetime | None = None) -> Follower:
    """The :class:`~analytics.live.follow.Follower` of run ``name`` on the store at
    ``db_path`` (short-lived connections per poll): a stored run resumes from its last bin
    (its first bin is the stored one; a ``start`` that differs is refused), a new one starts at
    ``start`` (default: the bin after the history's last).

    Raises ValueError (a start that does not follow the history, an ``until`` before the next
    bin's end, a history too short, a run stored with other options; all before the fit),
    store.UnknownDataset."""
    from analytics import store
    from analytics.services import open_store

    with open_store(db_path) as con:
        stored = store.live_run(con, name)
        first = None if stored is None else pd.Timestamp(stored["first_ts"])
        if first is not None and start is not None and pd.Timestamp(start) != first:
            raise ValueError(f"live run {name!r} started at {first.isoformat()}: leave --from "
                             "out to resume it, or give another --run name")
        hist, first_live = history_of(con, config.history, config.bin_s, config.w_prompt,
                                      config.w_completion, first or start)
        nxt = first_live if stored is None or stored["last_ts"] is None else \
            pd.Timestamp(stored["last_ts"]) + pd.Timedelta(seconds=config.bin_s)
    if until is not None and _naive_utc(until) < nxt + pd.Timedelta(seconds=config.bin_s):
        raise ValueError(f"--to {_naive_utc(until).isoformat()} is before the end of the next "
                         f"bin to close ({nxt.isoformat()}): nothing to follow")
    return Follower(lambda write: open_store(db_path, write),
                    PrometheusSource(prometheus_url, timeout_s), config, name, hist, first_live,
                    lag_s)


def follow(f: Follower, until: datetime | None = None, clock=time.time, sleep=time.sleep,
           on_event=None, max_backoff_s: float = 60.0) -> Iterator[dict]:
    """The records of the bins ``f`` closes, as they close (``until``: stop once the bin
    ending then is closed; None: never stop). Between bins it sleeps until the next one is
    due. A source that does not answer is retried with back-off (1, 2, 4 ... up to
    ``max_backoff_s`` seconds), each failure told to ``on_event({"event": "source_error",
    "error", "retry_in_s"})``; what it missed is back-filled on the next answer, so no bin is
    lost."""
    stop = None if until is None else _naive_utc(until)
    backoff = 1.0
    while stop is None or f.next_ts + f.step <= stop:
        try:
            records = f.poll(clock(), until=stop)
        except SourceError as exc:
            if on_event is not None:
                on_event({"event": "source_error", "error": str(exc), "retry_in_s": backoff})
            sleep(backoff)
            backoff = min(2 * backoff, max_backoff_s)
            continue
        backoff = 1.0
        yield from records
        if not records:
            due = _epoch_s((f.next_ts + f.step).to_pydatetime()) + f.lag_s
            sleep(max(min(due - clock(), f.config.bin_s), 0.05))


#: Bins the Live page draws (two days of 5-minute bins); the coverage so far counts them all.
VIEW_BINS = 576


def runs(con) -> list[dict]:
    """The stored live runs, newest first (:func:`analytics.store.live_runs`), with their
    options flattened in: ``name``, ``model``, ``history``, ``alpha``, ``bin_s``, ``bins``,
    ``alarms`` (bins with the alarm up), ``gaps`` (bins of unknown demand), ``first_ts`` and
    ``last_ts`` (ISO text or None)."""
    from analytics import store

    out = []
    for r in store.live_runs(con):
        cfg = r["config"]
        out.append({"name": r["name"], "model": cfg["model"], "history": cfg["history"],
                    "alpha": cfg["alpha"], "bin_s": cfg["bin_s"], "bins": r["bins"],
                    "alarms": r["alarms"], "gaps": r["gaps"],
                    "first_ts": pd.Timestamp(r["first_ts"]).isoformat(),
                    "last_ts": None if r["last_ts"] is None
                    else pd.Timestamp(r["last_ts"]).isoformat()})
    return out


def run_view(con, name: str, last_n: int = VIEW_BINS) -> dict:
    """What the Live page shows of run ``name``: ``run`` (:func:`runs`' record), ``bins`` (the
    last ``last_n`` stored bins, a DataFrame of :data:`analytics.store.live.BIN_COLUMNS` with
    ``ts``), ``last`` (the newest bin as a dict, or None), ``gaps`` (bins of unknown demand
    among all), ``coverage_so_far`` (over every bin of the run with known demand: the
    measured coverage) and ``target`` (1 - alpha). Raises KeyError for an unknown run."""
    from analytics import store

    run = next((r for r in runs(con) if r["name"] == name), None)
    if run is None:
        raise KeyError(f"no live run {name!r} in the store")
    bins = store.live_bins(con, name, limit=last_n)
    last = None if bins.empty else bins.iloc[-1].to_dict()
    return {"run": run, "bins": bins, "last": last, "gaps": run["gaps"],
            "coverage_so_far": None if last is None or pd.isna(last["coverage_so_far"])
            else float(last["coverage_so_far"]),
            "target": 1 - float(run["alpha"])}
