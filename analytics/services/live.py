"""Live service: a model's demand read from the operator's Prometheus, binned like a trace, and
judged bin by bin against an envelope started from a stored history (``headroom live``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime

import pandas as pd

from analytics.envelope import forecast
from analytics.live.envelope import LiveEnvelope
from analytics.live.follow import (  # noqa: F401 - MAX_WINDOW: the bound, named here too
    GRACE_S,
    MAX_WINDOW,
    Follower,
    LiveConfig,
    bin_records,
    epoch_s,
    window_frame,
)
from analytics.live.source import PrometheusSource, SourceError
from analytics.services import demand


def _naive_utc(t) -> pd.Timestamp:
    """``t`` as a naive UTC Timestamp (an aware one converted)."""
    t = pd.Timestamp(t)
    return t.tz_convert("UTC").tz_localize(None) if t.tzinfo is not None else t


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
    first_live = grid["ts"].iloc[-1] + step if start is None else _naive_utc(start)
    hist = grid[grid["ts"] < first_live]
    if hist.empty:
        raise ValueError(f"the live window starts at {first_live}, before the history "
                         f"{history!r} begins ({grid['ts'].iloc[0]}): start it right after the "
                         "history (--from the bin after its last, or leave --from out)")
    if hist["ts"].iloc[-1] + step != first_live:
        raise ValueError(f"the live window starts at {first_live}, but the history {history!r} "
                         f"ends with the bin at {hist['ts'].iloc[-1]}: start it right after the "
                         "history (--from the bin after its last, or leave --from out)")
    return hist, first_live


def carbon_of(con, config: LiveConfig) -> pd.Series | None:
    """The hourly carbon intensity (gCO2/kWh, by hour start) of ``config.carbon_site`` in the
    store, in ``config.carbon_basis`` (default: life-cycle, LCA, when the site has it; else
    the site's one series), or None without a site. Raises ValueError for a site the store has no carbon
    intensity for."""
    from analytics import store

    if not config.carbon_site:
        return None
    cat = store.site_catalog(con)
    rows = cat[(cat["tbl"] == "carbon_intensity") & (cat["site"] == config.carbon_site)]
    if rows.empty:
        have = sorted(cat.loc[cat["tbl"] == "carbon_intensity", "site"].unique())
        raise ValueError(f"no carbon intensity for site {config.carbon_site!r} in the store "
                         f"(sites with one: {', '.join(have) or 'none'}): ingest its hourly "
                         "file, or leave --carbon-site out")
    bases = set(rows["basis"].dropna())
    basis = config.carbon_basis or ("LCA" if "LCA" in bases else None)
    hourly = store.site_hourly(con, "carbon_intensity", config.carbon_site, basis)
    return pd.Series(hourly["value"].to_numpy(float), index=pd.to_datetime(hourly["ts"]))


def live_window(con, prometheus_url: str, config: LiveConfig, start: datetime | None,
                end: datetime, timeout_s: float = 10.0) -> Iterator[dict]:
    """One record per bin of ``[start, end)`` (``start`` default: the bin after the history's
    last), :func:`analytics.live.follow.bin_records`: ``ts``, ``model``, ``demand`` (the
    weighted-token target; None in a gap), ``prompt_tokens``, ``completion_tokens``,
    ``point``, ``lower``, ``upper``, ``alpha_t``, ``covered``, ``above``, ``alarm``,
    ``coverage_so_far``, ``samples``, ``resets``, ``gap_reason``, and the energy fields when
    ``config`` names the GPUs. Nothing is stored.

    The envelope starts from the stored dataset ``config.history`` on the same bins (its bins
    before ``start``); the live window must begin right after them.

    Raises
    ------
    ValueError : the window does not follow the history, is empty or longer than
        :data:`MAX_WINDOW`, the history is too short, or the carbon site is not stored
    analytics.live.source.SourceError : Prometheus does not answer or answers garbage
    store.UnknownDataset : no dataset ``history``
    """
    c = config
    hist, first_live = history_of(con, c.history, c.bin_s, c.w_prompt, c.w_completion, start)
    end_ts = _naive_utc(end)
    if end_ts <= first_live:
        raise ValueError(f"the window {first_live} to {end_ts} holds no bin")
    if end_ts - first_live > MAX_WINDOW:
        raise ValueError(f"the window {first_live} to {end_ts} is longer than "
                         f"{MAX_WINDOW.days} days: read it in parts of at most that")
    LiveEnvelope.split(hist, c.bin_s, c.alpha, c.k_above)  # a short history is refused first
    carbon = carbon_of(con, c)
    # The source is read before the fit, so a server that is down or answers garbage is refused
    # in the time of one request.
    frame = window_frame(PrometheusSource(prometheus_url, timeout_s), c, epoch_s(first_live),
                         epoch_s(end_ts))
    env = LiveEnvelope(hist, c.bin_s, alpha=c.alpha, base_model=c.base_model, k_above=c.k_above)
    with forecast.single_threaded():
        yield from bin_records(env, frame, first_live, end_ts, pd.Timedelta(seconds=c.bin_s),
                               c, carbon)


#: How far behind now a follower may start (its next bin): Prometheus' stored samples reach
#: back about as far (15 days by default); further, every bin would be a gap.
MAX_BEHIND = pd.Timedelta(days=31)


def follower(db_path, source, config: LiveConfig, name: str,
             start: datetime | None = None, timeout_s: float = 10.0,
             lag_s: float = 30.0, until: datetime | None = None, clock=time.time) -> Follower:
    """The :class:`~analytics.live.follow.Follower` of run ``name`` on the store at
    ``db_path`` (short-lived connections per poll), reading ``source``: a Prometheus URL (or
    a source object: :class:`~analytics.live.scrape.ScrapeSource`, an engine's own
    ``/metrics`` scraped by :func:`follow`). A stored run resumes from its last bin
    (its first bin is the stored one; a ``start`` that differs is refused), a new one starts at
    ``start`` (default: the bin after the history's last).

    A next bin further behind ``clock()`` than :data:`MAX_BEHIND` (a Prometheus), or than two
    bins and the grace (a scraped engine: it has no past samples), is refused: the history is
    too old to follow from.

    Raises ValueError (a start that does not follow the history, an ``until`` before the next
    bin's end, a history too old or too short, a run stored with other options; all before
    the fit), store.UnknownDataset."""
    from analytics import store
    from analytics.services import open_store

    with open_store(db_path) as con:
        stored = store.live_run(con, name)
        first = None if stored is None else pd.Timestamp(stored["first_ts"])
        if first is not None and start is not None and _naive_utc(start) != first:
            raise ValueError(f"live run {name!r} started at {first.isoformat()}: leave --from "
                             "out to resume it, or give another --run name")
        hist, first_live = history_of(con, config.history, config.bin_s, config.w_prompt,
                                      config.w_completion, first or start)
        carbon = carbon_of(con, config)
        nxt = first_live if stored is None or stored["last_ts"] is None else \
            pd.Timestamp(stored["last_ts"]) + pd.Timedelta(seconds=config.bin_s)
    if until is not None and _naive_utc(until) < nxt + pd.Timedelta(seconds=config.bin_s):
        raise ValueError(f"--to {_naive_utc(until).isoformat()} is before the end of the next "
                         f"bin to close ({nxt.isoformat()}): nothing to follow")
    scraped = not isinstance(source, str) and hasattr(source, "scrape")
    behind = pd.Timestamp(clock(), unit="s") - nxt
    bound = (pd.Timedelta(seconds=2 * config.bin_s + GRACE_S + lag_s) if scraped
             else MAX_BEHIND)
    if until is None and behind > bound:
        raise ValueError(
            f"the next bin to follow starts at {nxt.isoformat()}, {behind.days:,} days "
            f"{behind.seconds // 3600} h ago: "
            + ("a scraped engine has no past samples, so every bin since would be a gap"
               if scraped else f"more than {MAX_BEHIND.days} days of bins to back-fill")
            + "; ingest a history that ends now (the live series must start right after it), "
            "or give --to to read a past window")
    return Follower(lambda write: open_store(db_path, write),
                    PrometheusSource(source, timeout_s) if isinstance(source, str) else source,
                    config, name, hist, first_live, lag_s, carbon)


def follow(f: Follower, until: datetime | None = None, clock=time.time, sleep=time.sleep,
           on_event=None, max_backoff_s: float = 60.0) -> Iterator[dict]:
    """The records of the bins ``f`` closes, as they close (``until``: stop once the bin
    ending then is closed; None: never stop). Between bins it sleeps until the next one is
    due. A source that does not answer is retried with back-off (1, 2, 4 ... up to
    ``max_backoff_s`` seconds), each failure told to ``on_event({"event": "source_error",
    "error", "retry_in_s"})``; what it missed is back-filled on the next answer, so no bin is
    lost. A source that is scraped (an engine's ``/metrics``: ``scrape``) is scraped every
    ``scrape_interval_s`` between polls; what it missed is a gap, said per bin."""
    stop = None if until is None else _naive_utc(until)
    scrape = getattr(f.source, "scrape", None)
    backoff = 1.0
    while stop is None or f.next_ts + f.step <= stop:
        scrape_error = None
        if scrape is not None:  # an engine that does not answer: its missed samples are gaps,
            try:                # which the poll closes past the grace (no back-fill to wait for)
                scrape()
            except SourceError as exc:
                scrape_error = exc
        try:
            records = f.poll(clock(), until=stop)
        except SourceError as exc:
            scrape_error = exc
            records = None
        if scrape_error is not None:
            if on_event is not None:
                on_event({"event": "source_error", "error": str(scrape_error),
                          "retry_in_s": backoff})
            if records:
                yield from records
            if stop is not None and f.next_ts + f.step > stop:
                return
            sleep(min(backoff, f.source.scrape_interval_s) if scrape is not None else backoff)
            backoff = min(2 * backoff, max_backoff_s)
            continue
        backoff = 1.0
        yield from records
        if stop is not None and f.next_ts + f.step > stop:
            return  # the last bin before --to is closed: no wait for one after it
        if not records:
            # the next bin's due time; past it (a sample after its end still to come), the
            # next scrape (a scraped engine) or a few seconds (Prometheus)
            wait = epoch_s(f.next_ts + f.step) + f.lag_s - clock()
            step = f.source.scrape_interval_s if scrape is not None else max(f.lag_s / 4, 1.0)
            sleep(min(wait, f.config.bin_s, step) if wait > 0 else step)


#: Bins the Live page draws (two days of 5-minute bins); the coverage so far counts them all.
VIEW_BINS = 576


def runs(con) -> list[dict]:
    """The stored live runs, newest first (:func:`analytics.store.live_runs`), with their
    options flattened in: ``name``, ``model``, ``history``, ``alpha``, ``bin_s``, ``bins``,
    ``alarms`` (bins with the alarm up), ``gaps`` (bins of unknown demand), ``energy`` (the
    GPUs' label matchers, or None), ``carbon_site``, ``first_ts``, ``last_ts`` (ISO text or
    None) and ``dataset`` (the series dataset its bins are appended to, None before its first
    bin: :mod:`analytics.store.live`)."""
    from analytics import store

    out = []
    for r in store.live_runs(con):
        cfg = r["config"]
        out.append({"name": r["name"], "model": cfg["model"], "history": cfg["history"],
                    "alpha": cfg["alpha"], "bin_s": cfg["bin_s"], "bins": r["bins"],
                    "alarms": r["alarms"], "gaps": r["gaps"],
                    "energy": cfg.get("energy_selector"), "carbon_site": cfg.get("carbon_site"),
                    "first_ts": pd.Timestamp(r["first_ts"]).isoformat(),
                    "last_ts": None if r["last_ts"] is None
                    else pd.Timestamp(r["last_ts"]).isoformat(), "dataset": r["dataset"]})
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
