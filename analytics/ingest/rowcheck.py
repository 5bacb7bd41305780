"""Row checks of parsed input: each points at the first offending cell by line and column.

Owns :func:`parse_timestamps` (every text timestamp, offsets and ``--tz`` included, within the
accepted range), the per-cell checks (:func:`check_nonnegative`, :func:`check_range`,
:func:`check_allowed`, :func:`check_monotone`, :func:`check_unique`, :func:`raise_at_first`),
:func:`note_rows` (warnings that name lines) and :func:`check_rules`, which applies
:data:`analytics.schema.RULES` to every parsed file. Frames carry the ``__row`` index of
:func:`analytics.ingest.csvcheck.read_csv_checked` (or a format's ``__line``).
"""

from __future__ import annotations

import polars as pl

from analytics.ingest.rawfile import ROW, FormatError
from analytics.schema import CANONICAL, NAN_AS_EMPTY, NOTE_LINES_KEPT, RULES, TS_ACCEPTED, Note, Rule
from analytics.timelayouts import (
    ISO_DATE_T,
    ISO_OFFSET,
    ISO_ZULU,
    POLARS_WITH_OFFSET,
    POLARS_WITHOUT,
)


def parse_timestamps(
    frame: pl.DataFrame,
    col: str,
    display: str,
    fmt: str | None,
    *,
    header_line: int = 1,
    out: str = "ts",
    tz: str | None = None,
    notes: list | None = None,
    by: list[str] | None = None,
    unique: bool = False,
) -> pl.DataFrame:
    """Parse a text column into a naive UTC ``Datetime('us')`` column ``out``.

    ``fmt`` is the strftime format the source writes (one with ``%z`` converts the offset to
    UTC; ``None`` lets polars infer ISO 8601). It is tried first on every row (fast, vectorised);
    only the rows it misses are tried as ISO 8601 with or without an offset
    (:mod:`analytics.timelayouts` states the spellings for every road): ``T`` or space
    between date and time, 0-9 fraction digits, ``Z`` / ``+hh:mm`` / ``+hhmm`` / ``+hh``
    (``2024-05-10 00:00:00.123456+00:00``, ``2024-05-10T02:00:01Z``,
    ``2023-11-16 18:17:03.9799600``, PostgreSQL ``COPY``'s ``2024-03-10 12:00:00.5-05``).
    A value with an offset is converted to UTC with it.

    Values without an offset are UTC, or local times in the IANA zone ``tz`` when given, then
    converted with the repeated / skipped DST hour handled as
    :func:`analytics.ingest.localtime.localize_sequence` states (rows in file order, one
    sequence per ``by`` entity; ``unique``: one row per time per entity). Its notes (lines of
    ambiguous / non-existent times) are appended to ``notes``.

    Raises
    ------
    FormatError
        At the first value that is neither in ``fmt`` nor ISO 8601, or outside
        :data:`analytics.schema.TS_ACCEPTED`.
    """
    series = frame[col]
    if series.dtype != pl.String:
        series = series.cast(pl.String)
    first = series.drop_nulls().head(1).str.strip_chars()
    if fmt and "%z" not in fmt and first.len() and first.str.contains(_ISO_OFFSET)[0]:
        fmt += "%#z"  # the source writes offsets (Azure 2024 '+00:00'): read them on the fast
        # path; %#z also takes an hour-only offset (PostgreSQL COPY: '-05')
    parsed = series.str.strptime(pl.Datetime("us"), fmt, strict=False)
    aware = parsed.dtype.time_zone is not None  # type: ignore[union-attr]
    if aware:
        parsed = parsed.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
    naive = parsed.is_not_null() & (not aware)
    missed = parsed.is_null() & series.is_not_null()
    if missed.any():
        parsed, naive = _iso_fallback(series, parsed, naive, missed)
    bad = parsed.is_null() & series.is_not_null()
    if bad.any():
        idx = int(bad.arg_true()[0])
        raise FormatError(
            display, header_line + 1 + int(frame[ROW][idx]), col,
            f"{series[idx]!r} is not a timestamp" + (f" in format {fmt}" if fmt else "")
            + " or ISO 8601 (with an optional offset)",
        )
    first_ok, end = TS_ACCEPTED
    implausible = ((parsed < first_ok) | (parsed >= end)).fill_null(False)
    if implausible.any():
        idx = int(implausible.arg_true()[0])
        raise FormatError(display, header_line + 1 + int(frame[ROW][idx]), col,
                          f"{series[idx]!r} is outside the accepted range {ts_range_text()}")
    if tz is not None and naive.any():
        from analytics.ingest.localtime import localize_sequence  # it imports this module

        local, found = localize_sequence(frame.with_columns(parsed.alias(out)), out, tz, by=by,
                                         unique=unique, header_line=header_line, column=col)
        parsed = pl.select(pl.when(naive).then(local[out]).otherwise(parsed)).to_series()
        if notes is not None:
            notes.extend(found)
    return frame.with_columns(parsed.alias(out))


_ISO_DATE_T, _ISO_OFFSET = ISO_DATE_T, ISO_OFFSET  # the spellings: analytics.timelayouts


def _iso_fallback(series: pl.Series, parsed: pl.Series, naive: pl.Series,
                  missed: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Parse the ``missed`` rows of ``series`` as ISO 8601 (see :func:`parse_timestamps`) into
    ``parsed`` (naive UTC); ``naive`` marks the rows that had no offset."""
    idx = missed.arg_true()
    norm = (series.filter(missed).str.strip_chars().str.replace(_ISO_DATE_T, "$1 ")
            .str.replace(ISO_ZULU, "+00:00"))
    has_offset = norm.str.contains(_ISO_OFFSET)

    def read(formats: tuple[str, ...]) -> pl.Series:
        got = [norm.str.strptime(pl.Datetime("us"), f, strict=False) for f in formats]
        got = [g.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
               if g.dtype.time_zone is not None else g for g in got]  # type: ignore[union-attr]
        return pl.select(pl.coalesce(got)).to_series()

    with_offset = read(POLARS_WITH_OFFSET)
    without = read(POLARS_WITHOUT)
    value = pl.select(pl.when(has_offset).then(with_offset).otherwise(without)).to_series()
    return (parsed.scatter(idx, value),
            naive.scatter(idx, ~has_offset & value.is_not_null()))


def check_nonnegative(frame: pl.DataFrame, cols: list[str], display: str, header_line: int = 1,
                      names: dict[str, str] | None = None) -> None:
    """Raise FormatError at the first negative value in any of ``cols``."""
    names = names or {}
    for col in cols:
        neg = frame[col] < 0
        if neg.any():
            idx = int(neg.arg_true()[0])
            raise FormatError(
                display, header_line + 1 + int(frame[ROW][idx]), names.get(col, col),
                f"negative value {frame[col][idx]} (token counts and rates must be >= 0)",
            )


def check_monotone(frame: pl.DataFrame, display: str, tolerance_s: float, col_name: str,
                   header_line: int = 1, ts: str = "ts") -> int:
    """Raise if ``ts`` steps back by more than ``tolerance_s``; return the count of small steps back.

    Real request logs are written in arrival order but may carry small reorderings (clock jitter
    between frontends); those within the tolerance are kept and counted.
    """
    diff_s = frame[ts].diff().dt.total_microseconds() / 1e6
    back = diff_s < -tolerance_s
    if back.any():
        idx = int(back.arg_true()[0])
        hint = ("; a clock set back an hour at the end of daylight saving? give the zone the "
                "times were written in (--tz)") if 1800 <= -diff_s[idx] <= 3600 else ""
        raise FormatError(
            display, header_line + 1 + int(frame[ROW][idx]), col_name,
            f"timestamp goes back {-diff_s[idx]:.3f} s from the previous row "
            f"(tolerance {tolerance_s} s); the file is not in time order{hint}",
        )
    return int((diff_s < 0).sum())


def check_unique(frame: pl.DataFrame, keys: list[str], display: str, col_name: str,
                 header_line: int = 1) -> None:
    """Raise FormatError at the second occurrence of a repeated key (e.g. an hour twice)."""
    dup = frame.select(keys).is_duplicated()
    if dup.any():
        first_two = dup.arg_true()[:2]
        idx = int(first_two[1]) if len(first_two) > 1 else int(first_two[0])
        raise FormatError(display, header_line + 1 + int(frame[ROW][idx]), col_name,
                          f"{frame[keys[-1]][idx]} appears twice; one value per hour expected")


def raise_at_first(frame: pl.DataFrame, mask: pl.Series, display: str, column: str | int,
                   reason: str, header_line: int = 1) -> None:
    """Raise FormatError at the first row where boolean ``mask`` is true (no-op when none is).

    ``frame`` must carry the ``__row`` index of :func:`read_csv_checked`; the line is
    ``header_line + 1 + row``. ``reason`` may contain ``{value}``: the cell of ``column``.
    """
    if mask.any():
        idx = int(mask.arg_true()[0])
        value = frame[column][idx] if column in frame.columns else None
        raise FormatError(display, header_line + 1 + int(frame[ROW][idx]), column,
                          reason.format(value=value))


def ts_range_text() -> str:
    """The accepted timestamp range as said in messages (``1980-01-01 to 2099-12-31 UTC``)."""
    first, end = TS_ACCEPTED
    return f"{first:%Y-%m-%d} to {end.year - 1}-12-31 UTC (a unit or date-format slip?)"


def note_rows(frame: pl.DataFrame, mask: pl.Series, message: str, column: str | int | None,
              header_line: int = 1) -> Note | None:
    """A :class:`~analytics.schema.Note` naming every row where boolean ``mask`` is true (its
    lines from the ``__row`` index, ``header_line + 1 + row``), or None when no row is.

    For values an ingest accepts but the user should know about (a sentinel read as empty, a
    counter reset, an ambiguous local time): the report groups them under ``message`` and
    counts them.
    """
    mask = mask.fill_null(False)
    if not mask.any():
        return None
    rows = frame[ROW].filter(mask)
    lines = (rows.head(NOTE_LINES_KEPT) + header_line + 1).to_list()
    return Note(message, column=None if column is None else str(column), lines=lines,
                count=int(mask.sum()))


class NoteTally:
    """:func:`note_rows` summed over the batches of a streamed file: the first
    :data:`~analytics.schema.NOTE_LINES_KEPT` lines and the count of every row marked, in file
    order, so that :meth:`note` equals ``note_rows`` on the whole file."""

    def __init__(self, message: str, column: str | int | None, header_line: int = 1):
        self.message, self.column, self.header_line = message, column, header_line
        self.lines: list[int] = []
        self.count = 0

    def add(self, frame: pl.DataFrame, mask: pl.Series) -> None:
        """Count the rows of batch ``frame`` (with its ``__row`` index) where ``mask`` is true."""
        found = note_rows(frame, mask, self.message, self.column, self.header_line)
        if found is not None:
            self.lines.extend(found.lines[: NOTE_LINES_KEPT - len(self.lines)])
            self.count += found.count or 0

    def note(self) -> Note | None:
        """The whole file's Note, or None when no row was marked."""
        if not self.count:
            return None
        return Note(self.message, column=None if self.column is None else str(self.column),
                    lines=self.lines, count=self.count)


def check_range(frame: pl.DataFrame, cols: str | list[str], display: str, *,
                low: float | None = None, high: float | None = None, low_open: bool = False,
                header_line: int = 1) -> None:
    """Raise FormatError at the first value of ``cols`` outside ``[low, high]`` (``(low, high]``
    with ``low_open``); an open side is ``None``. Empty cells are not checked."""
    for col in [cols] if isinstance(cols, str) else cols:
        values = frame[col]
        bad = pl.Series([False] * frame.height, dtype=pl.Boolean)
        if low is not None:
            bad = bad | ((values <= low) if low_open else (values < low)).fill_null(False)
        if high is not None:
            bad = bad | (values > high).fill_null(False)
        bounds = (f"{'(' if low_open else '['}{'-inf' if low is None else low}, "
                  f"{'inf' if high is None else high}]")
        raise_at_first(frame, bad, display, col, "{value} is out of range " + bounds,
                       header_line)


def check_allowed(frame: pl.DataFrame, col: str, allowed: tuple[str, ...], display: str,
                  header_line: int = 1) -> None:
    """Raise FormatError at the first value of ``col`` not in ``allowed`` (empty cells pass)."""
    bad = ~frame[col].is_in(list(allowed)) & frame[col].is_not_null()
    raise_at_first(frame, bad, display, col,
                   "{value!r} is not one of " + ", ".join(allowed), header_line)


def row_lines(frame: pl.DataFrame) -> pl.Series | None:
    """The file line of each row: a format's ``__line`` column, else ``__row + 2`` (the
    ``__row`` index of a CSV with a one-line header), else None (lines unknown)."""
    if "__line" in frame.columns:
        return frame["__line"]
    if ROW in frame.columns:
        return frame[ROW] + 2
    return None


def check_rules(frame: pl.DataFrame, table: str, display: str,
                names: dict[str, str] | None = None) -> tuple[pl.DataFrame, list[Note]]:
    """Apply :data:`analytics.schema.RULES` to a parsed frame of ``table`` (the one place the
    validity rules live; every format's rows pass here before they are stored).

    Every float is finite (NaN / Inf: empty with a Note in :data:`~analytics.schema.NAN_AS_EMPTY`
    tables, else refused), counts are whole numbers (never truncated), and values lie within
    their rule's bounds (sign, range). ``names`` maps a canonical column to the name the file
    gives it, for messages.

    Returns
    -------
    (frame, notes): the frame with non-finite values emptied where that is the rule, and the
    notes saying so.

    Raises
    ------
    FormatError
        At the first value a rule refuses, naming its line (when the format keeps ``__line`` or
        ``__row``; otherwise line 1 and the data row) and column.
    """
    names, notes = names or {}, []
    lines = row_lines(frame)
    for col, dtype in frame.schema.items():
        if col not in CANONICAL.get(table, {}) or not dtype.is_numeric():
            continue
        rule, label = RULES.get(table, {}).get(col, Rule()), names.get(col, col)
        if dtype.is_float():
            bad = (~frame[col].is_finite()).fill_null(False)
            if bad.any() and table in NAN_AS_EMPTY:
                first = frame[col].filter(bad)[0]
                notes.append(Note(f"{label} value {first} is not a finite number: left empty "
                                  "(NULL, not 0)", column=label, count=int(bad.sum()),
                                  lines=() if lines is None else lines.filter(bad).head(20)))
                frame = frame.with_columns(pl.when(bad).then(None).otherwise(pl.col(col))
                                           .alias(col))
            elif bad.any():
                _refuse(frame, bad, col, lines, display, label, "{value} is not a finite number")
            if rule.integer:
                frac = (frame[col] != frame[col].round()).fill_null(False)
                _refuse(frame, frac, col, lines, display, label,
                        "{value} is not a whole number (a count); refused, not cut")
        if rule.low is not None:
            _refuse(frame, (frame[col] < rule.low).fill_null(False), col, lines, display, label,
                    f"{{value}} is below {rule.low:g}, the least a {col} can be")
        if rule.high is not None:
            _refuse(frame, (frame[col] > rule.high).fill_null(False), col, lines, display, label,
                    f"{{value}} is above {rule.high:g}, the most a {col} can be")
    return frame, notes


def _refuse(frame, mask, col, lines, display, label, reason) -> None:
    """Raise FormatError at the first row of ``mask`` (no-op when none); ``{value}`` in
    ``reason`` is that row's ``col``."""
    if not mask.any():
        return
    idx = int(mask.arg_true()[0])
    reason = reason.format(value=frame[col][idx])
    if lines is None:
        raise FormatError(display, 1, label, f"{reason} (data row {idx + 1})")
    raise FormatError(display, int(lines[idx]), label, reason)

