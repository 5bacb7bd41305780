"""BurstGPT request logs and the published BurstGPT aggregates.

Source: BurstGPT (Wang et al., KDD'25), https://github.com/HPMLL/BurstGPT, CC BY 4.0.

* v1 columns ``Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type``;
  v3 adds ``Session ID, Elapsed time`` (end-to-end latency, s) after ``Timestamp``; an empty
  cell of either is left empty (NULL) with a note naming the lines.
  ``Timestamp`` is seconds from 0:00 of the trace's first day (local time of the collector);
  the calendar dates are not published, so ``ts = t0 + Timestamp`` with ``t0`` from
  :class:`analytics.config.ParseOptions` (default: a Monday) - weekdays are *relative*.
  ``Response tokens == 0`` marks a failed request (``failed = true``).
* Per-minute aggregate ``t,tps,norm`` of BurstGPT_1 week 1: ``t`` minute index, ``tps`` = total
  tokens in that minute / 60 (rounded to 0.1). Rows go to ``demand_series`` with ``bin_s = 60``,
  ``tokens = tps * 60`` and no request count (the aggregate has none). Minutes absent from the
  file had no requests; the grid fills them with zero.
* Daily aggregate ``d,req,tok``: ``d`` day index, ``req`` requests, ``tok`` total tokens ->
  ``demand_series`` with ``bin_s = 86400``.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from analytics.ingest.fastcsv import Plan, carry_monotone, quoted
from analytics.ingest.formats._common import (
    ROW,
    FormatError,
    NoteTally,
    Parsed,
    check_monotone,
    check_nonnegative,
    header_fields,
    note_rows,
    raise_at_first,
    read_csv_checked,
    weekdays_note,
)

_V1 = ["Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"]


def _t0_us(opts) -> int:
    return int(opts.t0.timestamp() * 1_000_000)


def _relative_ts(seconds: pl.Expr, opts) -> pl.Expr:
    return pl.from_epoch((seconds * 1_000_000).round().cast(pl.Int64) + _t0_us(opts), "us")


def _check_range(frame, col, limit, display, reason) -> None:
    raise_at_first(frame, frame[col] > limit, display, col, "{value} " + reason)


_TEN_YEARS = "is beyond ten years from the trace start"


class Requests:
    NAME = "burstgpt"
    TABLE = "requests"
    SOURCE_COLUMNS = {"ts": "Timestamp", "model": "Model", "prompt_tokens": "Request tokens",
                      "completion_tokens": "Response tokens",
                      "failed": "Response tokens (0 = failed)", "session_id": "Session ID",
                      "latency_s": "Elapsed time"}
    ASSUMES_T0 = "BurstGPT's Timestamp counts seconds from the trace start (no dates)"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        fields = header_fields(head)
        # loose on purpose: a BurstGPT file missing a column gets a "missing column" error
        return "Timestamp" in fields and sum(c in fields for c in _V1) >= 3

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(path, display, _SPEC, optional=_OPTIONAL)
        fields = set(frame.columns)
        out, back, n_failed = _rows(frame, display, opts, fields)
        notes = [note_rows(frame, frame[col].is_null(), message, col)
                 for col, message in _empty_notes(fields)]
        return Parsed("requests", Requests.NAME, out, display, 1.0,
                      _warnings(back, n_failed, fields, notes, opts))

    @staticmethod
    def stream_plan(display, head, opts) -> Plan | None:
        """The streamed reading of a large BurstGPT file (:mod:`analytics.ingest.fastcsv`):
        the same checks and warnings as :meth:`parse`, batch by batch; None (the checked
        reader) for a header without every v1 column or with a repeated name."""
        header = header_fields(head)
        if len(set(header)) != len(header) or not set(_SPEC) <= set(header):
            return None
        fields = set(header) & {*_SPEC, *_OPTIONAL}
        types = {"Timestamp": "DOUBLE", "Elapsed time": "DOUBLE", "Request tokens": "DOUBLE",
                 "Response tokens": "DOUBLE", "Total tokens": "DOUBLE"}
        # __bad holds only what no later check catches (issue 28: 10 tests per row, not 17):
        # a non-finite value fails its cast to BIGINT (the read stops), a negative count the
        # stored rows' rules (min < 0), a fractional or negative Total the sum test; each of
        # them, and every cell here, is then named by the checked reader
        bad = [f"{quoted(c)} IS NULL" for c in _SPEC] + [
            f"{quoted(c)} <> trunc({quoted(c)})" for c in ("Request tokens", "Response tokens")
        ] + ['"Timestamp" < 0', f'"Timestamp" > {10 * 365 * 86400}',  # as _check_counts
             '"Total tokens" <> "Request tokens" + "Response tokens"']
        if "Elapsed time" in fields:
            bad.append('coalesce(NOT isfinite("Elapsed time"), false)')
        micros = 'CAST(round_even("Timestamp" * 1000000, 0) AS BIGINT)'  # as _relative_ts
        optional = [f"{quoted(c)} AS {_CANONICAL_OF[c]}" for c in _OPTIONAL if c in fields]
        select = ", ".join([  # columns the file lacks are left to the table's default (NULL)
            f"make_timestamp({micros} + {_t0_us(opts)}) AS ts", '"Model" AS model',
            '"Request tokens"::BIGINT AS prompt_tokens',
            '"Response tokens"::BIGINT AS completion_tokens', '"Response tokens" = 0 AS failed',
            *optional, "(" + " OR ".join(bad) + ") AS __bad"])
        tallies = [(col, NoteTally(message, col)) for col, message in _empty_notes(fields)]

        def rows(batch, state):  # the cell checks of _check_counts are in __bad
            carry_monotone(batch, state, display, opts.max_backstep_s, "Timestamp")
            state["failed"] = state.get("failed", 0) + int(batch["failed"].sum())
            for col, tally in tallies:
                tally.add(batch, batch[_CANONICAL_OF[col]].is_null())

        def warnings(state):
            return _warnings(state.get("back", 0), int(state.get("failed", 0)), fields,
                             [tally.note() for _, tally in tallies], opts)

        # the direct read: a row with an empty optional cell (a note naming lines) or a step
        # back in time goes to the batches; failed requests are counted on the stored rows
        empty = [f"{_CANONICAL_OF[c]} IS NULL" for c in _OPTIONAL if c in fields]
        return Plan({c: types.get(c, "VARCHAR") for c in header}, select, rows, warnings, 1.0,
                    batch_only=" OR ".join(empty) or "false",
                    direct_counts={"failed": "count(*) FILTER (WHERE failed)"})


_CANONICAL_OF = {"Session ID": "session_id", "Elapsed time": "latency_s"}
_SPEC = {"Timestamp": pl.Float64, "Model": pl.String, "Request tokens": pl.Int64,
         "Response tokens": pl.Int64, "Total tokens": pl.Int64}
_OPTIONAL = {"Session ID": pl.String, "Elapsed time": pl.Float64}


def _rows(frame: pl.DataFrame, display: str, opts, fields: set[str],
          last: pl.DataFrame | None = None) -> tuple[pl.DataFrame, int, int]:
    """Check the rows of a BurstGPT frame (or one batch of it: ``last`` is the previous batch's
    last ``__row, Timestamp, ts``, for the time order) and convert them: ``(requests rows,
    rows stepping back within the tolerance, failed requests)``.

    Raises
    ------
    FormatError
        A negative value, a Timestamp beyond ten years, Total tokens not Request + Response,
        a step back beyond ``opts.max_backstep_s``.
    """
    _check_counts(frame, display)
    frame = frame.with_columns(_relative_ts(pl.col("Timestamp"), opts).alias("ts"))
    order = frame.select(ROW, "ts")
    if last is not None:
        order = pl.concat([last.select(ROW, "ts").cast(order.schema), order])
    back = check_monotone(order, display, opts.max_backstep_s, "Timestamp")
    out = frame.select(
        pl.col("ts"),
        pl.col("Model").alias("model"),
        pl.col("Request tokens").alias("prompt_tokens"),
        pl.col("Response tokens").alias("completion_tokens"),
        (pl.col("Response tokens") == 0).alias("failed"),
        (pl.col("Session ID") if "Session ID" in fields else pl.lit(None, pl.String))
        .alias("session_id"),
        (pl.col("Elapsed time") if "Elapsed time" in fields else pl.lit(None, pl.Float64))
        .cast(pl.Float64).alias("latency_s"),
    )
    return out, back, int(out["failed"].sum())


def _check_counts(frame: pl.DataFrame, display: str) -> None:
    """Raise FormatError at a negative value, a Timestamp beyond ten years, or Total tokens
    that is not Request + Response tokens."""
    check_nonnegative(frame, ["Timestamp", "Request tokens", "Response tokens",
                              "Total tokens"], display)
    _check_range(frame, "Timestamp", 10 * 365 * 86400, display, f"s {_TEN_YEARS}")
    mismatch = frame["Total tokens"] != frame["Request tokens"] + frame["Response tokens"]
    if mismatch.any():
        idx = int(mismatch.arg_true()[0])
        raise FormatError(
            display, 2 + int(frame[ROW][idx]), "Total tokens",
            "Total tokens is not Request tokens + Response tokens",
        )


def _empty_notes(fields: set[str]) -> list[tuple[str, str]]:
    """``(column, message)`` of the notes naming empty optional cells."""
    return [(col, f"empty {col}: {what} left empty (NULL)")
            for col, what in (("Session ID", "session"), ("Elapsed time", "latency"))
            if col in fields]


def _warnings(back: int, n_failed: int, fields: set[str], notes: list, opts) -> tuple:
    """The warnings of a BurstGPT file, in the order the report shows them."""
    warnings = []
    if back:
        warnings.append(f"{back} rows step back in time within the tolerance")
    warnings.append(f"{n_failed} failed requests (Response tokens = 0) flagged; "
                    f"{weekdays_note(opts)}")
    if "Elapsed time" not in fields:
        warnings.append("BurstGPT v1 has no latency or session columns (v3 has them)")
    return tuple([*warnings, *(n for n in notes if n is not None)])


class Minute:
    NAME = "burstgpt_minute"
    TABLE = "demand_series"
    SOURCE_COLUMNS = {"ts": "t", "tokens": "tps (x 60)"}
    ASSUMES_T0 = "the minute index t counts from the trace start (no dates)"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        return header_fields(head) == ["t", "tps", "norm"]

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(path, display, {"t": pl.Int64, "tps": pl.Float64})
        check_nonnegative(frame, ["t", "tps"], display)
        _check_range(frame, "t", 10 * 365 * 1440, display, f"minutes {_TEN_YEARS}")
        _check_range(frame, "tps", 1e12, display, "tokens/s is not a plausible rate")
        frame = frame.with_columns(
            pl.from_epoch(pl.col("t") * 60_000_000 + _t0_us(opts), "us").alias("ts")
        )
        _refuse_repeated(frame, "t", "minute", display)
        check_monotone(frame, display, 0.0, "t")
        out = frame.select(
            "ts",
            pl.lit(60, pl.Int32).alias("bin_s"),
            (pl.col("tps") * 60.0).alias("tokens"),
            pl.lit(None, pl.Int64).alias("requests"),
        )
        warnings = (
            "per-minute aggregate: tokens = tps x 60 (tps rounded to 0.1 at source); "
            "no request counts in this file; absent minutes had no requests",
        )
        return Parsed("demand_series", Minute.NAME, out, display, 60.0, warnings)


class Daily:
    NAME = "burstgpt_daily"
    TABLE = "demand_series"
    SOURCE_COLUMNS = {"ts": "d", "tokens": "tok", "requests": "req"}
    ASSUMES_T0 = "the day index d counts from the trace start (no dates)"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        return header_fields(head) == ["d", "req", "tok"]

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(path, display, {"d": pl.Int64, "req": pl.Int64, "tok": pl.Float64})
        check_nonnegative(frame, ["d", "req", "tok"], display)
        _check_range(frame, "d", 10 * 365, display, f"days {_TEN_YEARS}")
        frame = frame.with_columns(
            pl.from_epoch(
                pl.col("d") * int(timedelta(days=1).total_seconds() * 1e6) + _t0_us(opts), "us"
            ).alias("ts")
        )
        _refuse_repeated(frame, "d", "day", display)
        check_monotone(frame, display, 0.0, "d")
        out = frame.select(
            "ts",
            pl.lit(86400, pl.Int32).alias("bin_s"),
            pl.col("tok").alias("tokens"),
            pl.col("req").alias("requests"),
        )
        return Parsed("demand_series", Daily.NAME, out, display, 86400.0,
                      (weekdays_note(opts),))


def _refuse_repeated(frame: pl.DataFrame, col: str, unit: str, display: str) -> None:
    """Refuse an aggregate whose bin index ``col`` repeats (one value per minute / day),
    naming the line of the repeat."""
    dup = frame[col].is_duplicated()
    if dup.any():
        idx = int(dup.arg_true()[1])
        raise FormatError(display, 2 + int(frame[ROW][idx]), col, f"{unit} index repeated")
