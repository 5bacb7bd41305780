"""Hourly site series (carbon intensity, prices, weather): blank values and absent hours.

Every hourly format (``sustaindc_carbon``, ``greendcc_carbon``, ``greendcc_prices``,
``epw_weather``, ``openmeteo_weather`` and canonical carbon / prices / weather files) keeps a
blank value as an empty value (never 0, never filled at ingest) and reports it, and reports the
hours that have no row at all between a series' first and last hour. Both are
:class:`~analytics.schema.Note` warnings, so the ingest report shows them with line, column and
count. Filling is a decision of the analysis that uses the series (``headroom dispatch
--fill-missing``), not of the ingest.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from analytics.ingest.csvcheck import ROW
from analytics.schema import Note

#: Missing hours a note names as timestamps (its count keeps the total).
SHOWN_HOURS = 5

_HOUR = timedelta(hours=1)


def hour_text(ts: datetime) -> str:
    """An hour as the notes and messages print it (UTC, minutes).

    >>> hour_text(datetime(2022, 1, 8, 3))
    '2022-01-08 03:00'
    """
    return ts.strftime("%Y-%m-%d %H:%M")


def hours_list(hours: list[datetime], total: int | None = None) -> str:
    """The first :data:`SHOWN_HOURS` hours as text, with ``...`` when more are missing."""
    total = len(hours) if total is None else total
    text = ", ".join(hour_text(h) for h in hours[:SHOWN_HOURS])
    return text + (", ..." if total > SHOWN_HOURS else "")


def _absent(hours: pl.Series) -> tuple[int, list[datetime], pl.Series]:
    """Absent hours of one series: ``(count, the first SHOWN_HOURS, mask of rows after a gap)``.

    ``hours`` is sorted, hour-truncated and unique."""
    step_h = (hours.diff().dt.total_seconds() / 3600).fill_null(1)
    after_gap = step_h > 1
    count = int((step_h.filter(after_gap) - 1).sum()) if after_gap.any() else 0
    first: list[datetime] = []
    for idx in after_gap.arg_true().to_list():
        h = hours[idx - 1] + _HOUR
        while h < hours[idx] and len(first) < SHOWN_HOURS:
            first.append(h)
            h += _HOUR
        if len(first) >= SHOWN_HOURS:
            break
    return count, first, after_gap


def absent_hours_notes(frame: pl.DataFrame, column: str | None, keys: tuple[str, ...] = (),
                       *, ts: str = "ts", header_line: int = 1) -> list[Note]:
    """One note per series (group of ``keys``, e.g. site and basis) that lacks whole hours.

    Parameters
    ----------
    frame : parsed rows with a UTC ``ts`` column and, when read from a CSV, the ``__row`` index
        (then the message names the line that follows each gap; the note has no ``lines``, as
        an absent hour has no line)
    column : the time column's name as written in the file
    keys : columns identifying one series in a file that holds several

    Returns notes whose ``count`` is the number of absent hours and whose message names the
    first :data:`SHOWN_HOURS` of them (UTC); no note for a series without a gap.
    """
    out = []
    groups = frame.partition_by(list(keys), as_dict=True, maintain_order=True) if keys \
        else {(): frame}
    for key, part in groups.items():
        part = part.filter(pl.col(ts).is_not_null()).with_columns(
            pl.col(ts).dt.truncate("1h").alias("__hour")).sort("__hour")
        part = part.unique("__hour", keep="first", maintain_order=True)
        count, first, after_gap = _absent(part["__hour"])
        if not count:
            continue
        label = ", ".join(f"{k} {v}" for k, v in zip(keys, key, strict=True) if v is not None)
        after = (part[ROW].filter(after_gap) + header_line + 1).to_list() \
            if ROW in part.columns else []
        where = (f" (gap{'s' if len(after) > 1 else ''} before line"
                 f"{'s' if len(after) > 1 else ''} "
                 + ", ".join(map(str, after[:SHOWN_HOURS])) + (", ..." if len(after) > SHOWN_HOURS
                                                               else "") + ")") if after else ""
        out.append(Note(
            f"hours absent (no row){' for ' + label if label else ''}: {count:,} between "
            f"{hour_text(part['__hour'][0])} and {hour_text(part['__hour'][-1])} UTC, first "
            f"missing {hours_list(first, count)}{where}",
            column=column, count=count))
    return out


#: what a row spacing is called, longest first (a yearly or monthly export has the hourly
#: file's columns: Electricity Maps publishes all three)
_SPACINGS = ((timedelta(days=365), "yearly"), (timedelta(days=28), "monthly"),
             (timedelta(days=7), "weekly"), (timedelta(days=1), "daily"))


def check_hourly_spacing(frame: pl.DataFrame, column: str, display: str,
                         keys: tuple[str, ...] = (), *, ts: str = "ts",
                         header_line: int = 1) -> None:
    """Refuse a site series whose rows are not an hour apart: an Electricity Maps *yearly*,
    *monthly* or *daily* export (the hourly file's columns, one row per period) or a
    sub-hourly one. The spacing judged is the median step between a series' rows (``keys``
    name a series), so absent hours in an hourly file do not count against it.

    A file whose every series has one row cannot show its spacing (an Electricity Maps yearly
    export of one year is one row): it is refused too, at its first row.

    Raises FormatError at the series' second row (line ``__row + header_line + 1``), column
    ``column``, saying what the spacing is and that hourly data is needed."""
    from analytics.ingest.csvcheck import FormatError

    groups = frame.partition_by(list(keys), as_dict=True, maintain_order=True) if keys \
        else {(): frame}
    parts = [p.filter(pl.col(ts).is_not_null()).sort(ts) for p in groups.values()]
    if parts and max(p.height for p in parts) == 1:
        first = next(p for p in parts if p.height)
        line = int(first[ROW][0]) + header_line + 1 if ROW in first.columns else header_line + 1
        raise FormatError(display, line, column, (
            "one row per series: its spacing cannot be told, and an Electricity Maps yearly or "
            "monthly export looks just like one hour; headroom needs hourly rows (give at least "
            "two hours, or download the hourly export)"))
    for part in parts:
        if part.height < 2:
            continue
        steps = part[ts].diff().drop_nulls()
        step = steps.filter(steps > timedelta(0)).median()
        if step is None or step == _HOUR:
            continue
        name = next((n for limit, n in _SPACINGS if step >= limit), None)
        what = (f"a {name} series (rows {step.days:,} days apart)" if name else
                f"rows {step.total_seconds() / 3600:g} h apart" if step > _HOUR else
                f"a sub-hourly series (rows {step.total_seconds() / 60:g} min apart)")
        line = int(part[ROW][1]) + header_line + 1 if ROW in part.columns else 1
        raise FormatError(display, line, column, (
            f"{what}, not hourly: headroom needs one row per hour (for Electricity Maps, "
            "download the hourly export)" + (
                "; aggregate to hourly means first" if step < _HOUR else "")))


def blank_note(frame: pl.DataFrame, value: str, column: str, what: str,
               header_line: int = 1) -> Note | None:
    """A note naming the rows whose ``value`` is empty (kept empty, not filled), with the first
    hours they stand for; None when every row has a value. ``frame`` carries ``__row`` when read
    from a CSV, else the note has no lines."""
    mask = frame[value].is_null()
    if not mask.any():
        return None
    hours = frame["ts"].filter(mask).sort().to_list()
    message = (f"{what} empty in the source; kept as empty values, not filled (first hours "
               f"{hours_list(hours)} UTC)")
    if ROW in frame.columns:
        lines = (frame[ROW].filter(mask).head(50) + header_line + 1).to_list()
    else:
        lines = []
    return Note(message, column=column, lines=lines, count=int(mask.sum()))
