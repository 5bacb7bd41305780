"""Local wall-clock times written without an offset -> naive UTC, with the DST hours handled.

Many tools print the host's local time and no offset (``sacct``, nvidia-smi, database exports).
Given the IANA zone the times were written in (``ParseOptions.tz``, CLI ``--tz``), these helpers
convert them to UTC and say, in a :class:`~analytics.schema.Note` naming the lines, which values
fell into the two hours a zone's clock makes special (IANA tz database rules via
:mod:`zoneinfo`; fold semantics of PEP 495):

* **ambiguous** (the hour repeated when clocks go back, e.g. 01:00-02:00 on 2024-11-03 in
  America/New_York): read as the *earlier* of its two instants (daylight time), unless the row
  order says otherwise: in one row (job Submit <= Start <= End) a later column is read as the
  later instant when the earlier one would put it before the column preceding it; in a
  time-ordered log (one entity's samples) the values after the clock steps back (or, in a series
  with one row per time, repeats) within that hour are the later instant.
* **non-existent** (the hour skipped when clocks go forward, e.g. 02:00-03:00 on 2024-03-10 in
  America/New_York): read with the UTC offset in force before the change (PEP 495 ``fold=0``),
  i.e. moved forward by the gap: 02:30 is read as 03:30 EDT = 07:30 UTC.

Without a zone, times are read as UTC and :func:`note_clock_steps` points at rows whose order
betrays a clock set back (a likely repeated DST hour).
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta

import polars as pl

from analytics.config import check_zone
from analytics.ingest.rowcheck import ROW, note_rows
from analytics.schema import Note

__all__ = ["check_zone", "localize_rows", "localize_sequence", "note_clock_steps",
           "zone_offset_h"]


def _readings(naive: pl.Series, tz: str) -> tuple[pl.Series, pl.Series, pl.Series, pl.Series]:
    """(earlier UTC reading, later UTC reading, ambiguous mask, non-existent mask) of naive local
    times in ``tz``; all naive ``Datetime('us')``. The two readings differ only where ambiguous;
    a non-existent time takes the pre-change offset in both (PEP 495 ``fold=0``)."""
    naive = naive.cast(pl.Datetime("us"))

    def reading(which: str) -> pl.Series:
        return (naive.dt.replace_time_zone(tz, ambiguous=which, non_existent="null")
                .dt.convert_time_zone("UTC").dt.replace_time_zone(None))

    early, late = reading("earliest"), reading("latest")
    gap = early.is_null() & naive.is_not_null()
    if gap.any():
        zone = zoneinfo.ZoneInfo(tz)
        idx = gap.arg_true().to_list()
        fixed = [naive[i].replace(tzinfo=zone, fold=0).astimezone(UTC).replace(tzinfo=None)
                 for i in idx]
        patch = pl.Series(fixed, dtype=pl.Datetime("us"))
        early = early.scatter(idx, patch)
        late = late.scatter(idx, patch)
    return early, late, (early != late).fill_null(False), gap


def _gap_note(frame: pl.DataFrame, gap: pl.Series, tz: str, column: str,
              header_line: int) -> Note | None:
    return note_rows(frame, gap, f"non-existent local time (the hour skipped when {tz} clocks go "
                     "forward): read with the offset before the change, i.e. moved forward by "
                     "the gap", column, header_line)


def localize_rows(frame: pl.DataFrame, cols: list[str], tz: str, *, header_line: int = 1,
                  names: dict[str, str] | None = None) -> tuple[pl.DataFrame, list[Note]]:
    """Convert naive local ``cols`` of each row (in their order: Submit, Start, End) to UTC.

    Parameters
    ----------
    frame : rows with the ``__row`` index and naive ``Datetime`` columns ``cols`` (nulls kept)
    cols : columns in the order their instants must keep within a row
    tz : IANA zone the times were written in
    header_line, names : for the notes (line = header_line + 1 + row; column as in the file)

    Returns
    -------
    (frame with ``cols`` as naive UTC, notes naming ambiguous / non-existent / still-impossible
    rows). An ambiguous value is the earlier instant unless that puts it before the nearest
    earlier non-empty column of the row; then it is the later instant.
    """
    names = names or {}
    notes: list[Note | None] = []
    prev: pl.Series | None = None
    prev_name = None
    out = {}
    for col in cols:
        early, late, amb, gap = _readings(frame[col], tz)
        use_late = (amb & (early < prev).fill_null(False)) if prev is not None \
            else pl.repeat(False, len(amb), eager=True)
        value = pl.select(pl.when(use_late).then(late).otherwise(early)).to_series()
        label = names.get(col, col)
        notes.append(note_rows(frame, amb & ~use_late, f"ambiguous local time (the hour repeated "
                               f"when {tz} clocks go back): read as the earlier instant "
                               "(daylight time)", label, header_line))
        notes.append(note_rows(frame, use_late, f"ambiguous local time (the hour repeated when "
                               f"{tz} clocks go back): read as the later instant (standard time) "
                               f"so that {label} is not before {prev_name}", label, header_line))
        notes.append(_gap_note(frame, gap, tz, label, header_line))
        out[col] = value
        prev = value if prev is None else value.fill_null(prev)
        prev_name = label if prev_name is None else f"{prev_name}/{label}"
    result = frame.with_columns(*[s.alias(c) for c, s in out.items()])
    return result, [n for n in notes if n is not None]


def localize_sequence(frame: pl.DataFrame, col: str, tz: str, *, by: list[str] | None = None,
                      unique: bool = False, header_line: int = 1,
                      column: str | None = None) -> tuple[pl.DataFrame, list[Note]]:
    """Convert one naive local column of a time-ordered log to UTC (rows in file order).

    Parameters
    ----------
    frame : rows with ``__row`` and the naive ``Datetime`` column ``col``
    col : the column (replaced by its naive UTC value)
    tz : IANA zone the times were written in
    by : columns that tell entities apart (a GPU index, a site): each one's rows are a sequence
    unique : one row per time per entity (hourly series, one sample per GPU per time): a repeated
        time inside the ambiguous hour marks the clock set back, like a step back does
    header_line, column : for the notes

    Returns
    -------
    (frame, notes). Within an entity and local date, an ambiguous value is the earlier instant
    until the clock steps back (or repeats, with ``unique``) and the later instant from then on.
    """
    by = by or []
    label = column or col
    early, late, amb, gap = _readings(frame[col], tz)
    naive = frame[col].cast(pl.Datetime("us"))
    work = frame.select(ROW, *by).with_columns(
        naive.alias("__t"), amb.alias("__amb"))
    step = pl.col("__t").diff().over(by) if by else pl.col("__t").diff()
    back = (step <= pl.duration()) if unique else (step < pl.duration())
    keys = [*by, pl.col("__t").dt.date()]
    work = work.with_columns((back.fill_null(False) & pl.col("__amb")).alias("__back"))
    use_late = work.select(
        pl.col("__amb") & (pl.col("__back").cast(pl.Int32).cum_sum().over(keys) > 0)
    ).to_series()
    value = pl.select(pl.when(use_late).then(late).otherwise(early)).to_series()
    notes = [
        note_rows(frame, amb & ~use_late, f"ambiguous local time (the hour repeated when {tz} "
                  "clocks go back): read as the earlier instant (daylight time), the first pass "
                  "through the hour", label, header_line),
        note_rows(frame, use_late, f"ambiguous local time (the hour repeated when {tz} clocks "
                  "go back): read as the later instant (standard time), after the clock stepped "
                  "back", label, header_line),
        _gap_note(frame, gap, tz, label, header_line),
    ]
    return frame.with_columns(value.alias(col)), [n for n in notes if n is not None]


def note_clock_steps(frame: pl.DataFrame, col: str, *, by: list[str] | None = None,
                     unique: bool = False, header_line: int = 1,
                     column: str | None = None) -> list[Note]:
    """Without a zone: Notes naming rows of a time-ordered log where the clock steps back.

    A step back of 30 min to an hour (or, with ``unique``, a repeated time in a series sampled
    every 30 min or slower: an hourly file's repeated hour) is the signature of the hour
    repeated when daylight saving ends. A shorter step back is not (a 10-s step in a 1-s log:
    rows out of order, joined clocks) and gets its own note. Steps of more than an hour are
    left to the format's own checks. Returns the notes that apply (none, one or both)."""
    by = by or []
    step = pl.col(col).diff()
    step = step.over(by) if by else step
    steps = frame.select(step.alias("__s")).to_series()
    forward = steps.filter(steps > timedelta(0))
    coarse = forward.len() > 0 and forward.median() >= timedelta(minutes=30)
    hour, half = pl.duration(hours=1), pl.duration(minutes=30)
    dst = (step >= -hour) & ((step <= -half) | ((step == pl.duration()) if unique and coarse
                                                 else pl.lit(False)))
    small = (step > -half) & (step < pl.duration())
    dst_mask = frame.select(dst.fill_null(False)).to_series()
    small_mask = frame.select(small.fill_null(False)).to_series()
    notes = [note_rows(frame, dst_mask, "the clock steps back (or repeats) by up to an hour: "
                       "likely the hour repeated when daylight saving ends; times were read as "
                       "UTC - give the zone they were written in (--tz, Data page 'Time zone')",
                       column or col, header_line),
             note_rows(frame, small_mask, "the clock steps back by less than 30 min: rows out "
                       "of time order (not a daylight-saving change); kept and sorted by time",
                       column or col, header_line)]
    return [n for n in notes if n is not None]


def zone_offset_h(tz: str, at: datetime) -> float:
    """UTC offset of ``tz`` at the naive-UTC instant ``at``, in hours (America/New_York at
    2024-11-04 12:00 -> -5.0)."""
    local = at.replace(tzinfo=UTC).astimezone(zoneinfo.ZoneInfo(tz))
    return local.utcoffset().total_seconds() / 3600.0
