"""The one road of request traces: DuckDB reads the CSV, SQL checks it, headroom names a bad row.

Issue 15: a 5 M-row trace read whole by polars, checked in several passes, copied to Arrow and
then to DuckDB cost 1.6-4.3x the CPU of DuckDB's own ``read_csv`` and 2 GB of memory at 20 M
rows; issue 28: files under 64 MB still took that reader at 0.29-0.33x. Every CSV (plain or
gzip, any size, a byte-order mark, any ``--tz``) of a format with a ``stream_plan`` (BurstGPT,
Azure LLM 2023 / 2024) is read here. DuckDB's ``read_csv`` reads the file with explicit column
types (``auto_detect=false``, strict rows) in batches of :data:`BATCH_ROWS` rows; SQL marks
every cell the checked reader would refuse (an empty required cell, a fractional or non-finite
count, a time not in the format's layout) in one ``__bad`` column; each batch then passes the
format's own checks (the time order and the warnings carried from batch to batch) and is written
to the store by one INSERT inside the ingest transaction. Python holds one batch at a time, and
the store's DuckDB holds at most :data:`analytics.store.writes.STREAM_MEMORY` while it writes
and checkpoints (peak RSS of the CLI: 386 MiB at 5 M BurstGPT rows, 430 MiB at 20 M, against
443 and 841 MiB without that limit, 850 MiB and 1.95 GB before streaming;
``bench/bench_ingest.py``).

A plan with ``batch_only`` (both formats) is first read *directly*: one ``INSERT ... SELECT`` in
the store's transaction from DuckDB's parallel ``read_csv``, the plan's ``__bad`` stopping the
statement at a cell the cast would lose, then one scan of the stored rows for the validity
rules, the time range, the time order, the plan's ``batch_only`` rows and its
``direct_counts`` (BurstGPT's failed requests) (:meth:`Streamed.direct_sql`,
:meth:`Streamed.direct_check`). No row passes through Python and
the rows are compressed once (the batches cost polars and Arrow copies and a second compression
at the checkpoint: 4.0 s of CPU against 2.5 s for a 5 M-row Azure trace). Rows that fill only
time and token counts go to the store's narrow ``requests_tokens`` (schema 13,
:data:`analytics.schema.NARROW`): DuckDB's append of the five empty or constant columns of the
9-column table cost more than the checks (0.82x DuckDB's ``read_csv`` with it, 0.61x before).
A row to note or a step back in time rolls back and the file is read again batch by batch,
which counts and names them; a row the checked reader refuses goes to it directly.

Anything the fast reader does not judge raises :class:`~analytics.schema.StreamRefused`: the
transaction rolls back (the store is as it was) and the file is read again by the checked reader
(:func:`analytics.ingest.formats.parse_file`), which names the first bad line and column with
the messages it always gave. So the fast path only ever accepts what the checked path accepts,
except DuckDB's lenient spellings of numbers and quotes: a whole number written ``2.0``,
``2.``, ``.0``, ``1e3`` or ``1_000`` in a count column, an empty extra field at the end of a
row (``...,log,``), a cell `` "abc"`` (read as ``abc``), a stray quote inside a cell and
bare-CR line endings are read instead of being refused (the break-it review of the canonical
plan lists them; no value changes but the quoted cell's).

UTF-16 text and a pandas index column are streamed into a temporary UTF-8 copy without them
first (one output line per input line, deleted with the stream), which this road then reads.
BurstGPT, Azure LLM and canonical ``requests`` CSVs have plans. The other tabular formats keep
the checked reader, by their shape: sacct and nvidia-smi write local times whose repeated and
skipped DST hours are resolved over each job's or GPU's whole series (a batch cannot), nvidia-smi
without a header needs ``--fields`` and drops error lines by content, and the hourly site series
(carbon, weather, prices) report the absent hours of each site, which needs the whole series;
their files are small (a year of hourly rows is 8,760 lines).
Every DuckDB call of this road is in :mod:`analytics.store.csvread` (issue 28: the DuckDB code
behind the store); the plans' select lists are SQL text that the formats declare and the store
runs. Both roads are held to the same answers by ``tests/ingest/test_fastcsv.py`` (rows, warnings,
refusals) and by the malformed corpus run on the one road
(``test_malformed_corpus.py::test_the_one_road_gives_the_corpus_answer``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from analytics.ingest.rawfile import ROW, Expanded, FormatError, is_gzip
from analytics.ingest.rowcheck import check_rules
from analytics.schema import CANONICAL, Parsed, StreamRefused, ts_out_of_range
from analytics.store import csvread

#: Smallest file (bytes) read on the streamed road: 0, every file of a format with a plan
#: (issue 28: the one road; files under 64 MB took the checked reader at 0.29-0.33x DuckDB's
#: throughput). Tests raise it to keep the checked reader for a file.
FAST_MIN_BYTES = 0

#: Rows per batch: about 30 MB of polars + Arrow memory for a BurstGPT batch.
BATCH_ROWS = 1 << 18

#: Memory DuckDB's CSV reader may hold: :data:`analytics.store.csvread.READER_MEMORY`.
READER_MEMORY = csvread.READER_MEMORY


@dataclass
class Plan:
    """What a format's fast path reads and how it checks a batch.

    Attributes
    ----------
    columns : every header field in file order -> DuckDB type to read it as
    select : SQL select list over those columns (``cells``): the table's canonical columns the
        file fills (named and typed as :data:`~analytics.schema.CANONICAL` states; the others
        are left to the table's default, NULL), any column the checks need, and a boolean
        ``__bad`` (true where the checked reader would refuse the row)
    rows : ``rows(batch, state)`` checks a batch (a polars frame of the selected columns with
        ``__row``); raises FormatError or StreamRefused; ``state`` is a dict the plan keeps
        across batches
    warnings : ``warnings(state) -> tuple`` once every batch passed
    resolution_s : the format's time resolution (``Parsed.resolution_s``)
    timestampformat : the layout of the columns ``columns`` types ``TIMESTAMP`` (DuckDB's
        ``read_csv`` option; a cell not in it stops the read: the checked reader judges it)
    batch_only : SQL condition over the selected columns, true on a row only ``rows`` judges (a
        cell to note, a count the warnings carry); with it the file is first read by one
        ``INSERT ... SELECT`` in the store (:meth:`Streamed.direct_sql`), which leaves the file
        to the batches at such a row or at a step back in time, and ``warnings(state)`` are the
        warnings of a file without one, ``state`` holding ``direct_counts`` (the select must
        give ``ts``). None: batches only.
    direct_counts : name -> SQL aggregate over the stored canonical columns, computed in the
        direct read's one scan of the stored rows and put in ``state`` for ``warnings`` (e.g.
        BurstGPT's failed requests, which the batches count in ``rows``)
    assumptions : what the plan assumes of every row (``Parsed.assumptions``: a zone)
    fallback : ``fallback() -> Plan``: the plan without its layout shortcut (``read_csv``'s own
        timestamp parse), for a file whose cells do not all fit that layout; None: such a file
        goes to the checked reader
    table : the canonical table the file fills, where the format serves several (canonical
        CSV); None: the format's ``TABLE``
    sources : canonical field -> the file's column (``Parsed.sources``); empty: the format's
        ``SOURCE_COLUMNS``
    """

    columns: dict[str, str]
    select: str
    rows: Callable[[pl.DataFrame, dict], None]
    warnings: Callable[[dict], tuple]
    resolution_s: float
    state: dict = field(default_factory=dict)
    timestampformat: str | None = None
    batch_only: str | None = None
    direct_counts: dict[str, str] = field(default_factory=dict)
    assumptions: tuple[str, ...] = ()
    table: str | None = None
    sources: dict[str, str] = field(default_factory=dict)
    fallback: Callable[[], Plan] | None = None


def eligible(path: Path, head: str, opts, expanded: Expanded | None = None) -> bool:
    """Whether ``path`` goes the streamed way: a plain or gzip file that is (decompressed, as
    ``expanded`` says) at least :data:`FAST_MIN_BYTES`, whose text is UTF-8 (a byte-order
    mark at its start is fine: DuckDB skips the header line it sits on) and has no pandas
    index column. DuckDB reads gzip itself: a large gzip trace once went to the checked reader
    and took 5 GB of memory for 2 GB of text. UTF-16 text and an index column are first
    streamed into a UTF-8 copy without them (:func:`analytics.ingest.formats.parse_file`),
    which is what comes here."""
    from analytics.ingest.encoding import source_codec
    from analytics.ingest.leading_index import is_index_column

    size = expanded.bytes if expanded is not None else Path(path).stat().st_size
    if size < FAST_MIN_BYTES:
        return False
    return head != "PAR1" and source_codec(path) is None and not is_index_column(head)


#: Longest line the streamed road reads (DuckDB's ``read_csv`` default ``max_line_size``): a
#: longer line in the middle of a file stops DuckDB's read (the checked reader then names it),
#: but a longer *last* line is dropped without a word (DuckDB 2.0: the file's last line of over
#: about 30 MB vanished, exit 0), so :func:`check_last_line` refuses it first.
MAX_LINE_BYTES = 2_097_152


def check_last_line(path: Path, display: str, expanded: Expanded | None = None) -> None:
    """Refuse a file whose last line is longer than :data:`MAX_LINE_BYTES`: a plain file read
    from the end (one seek, at most 2 MiB; a refusal counts the lines before it to name it), a
    gzip file from the counts its size check made (``expanded``).

    Raises
    ------
    FormatError
        Naming the last line, its length and the limit.
    """
    if expanded is not None and expanded.last_line_bytes is not None:
        if expanded.last_line_bytes > MAX_LINE_BYTES:
            line = expanded.newlines() + (0 if expanded.trailing_newline else 1)
            raise FormatError(display, line, 1, _too_long(line, expanded.last_line_bytes))
        return
    size = Path(path).stat().st_size
    if size <= MAX_LINE_BYTES:
        return
    with open(path, "rb") as fh:
        fh.seek(size - MAX_LINE_BYTES - 2)
        tail = fh.read()
    body = tail.rstrip(b"\r\n")  # the last line with text, without its line ending(s)
    if b"\n" in body:
        return
    end = size - (len(tail) - len(body))  # where that line's text ends
    start = 0
    with open(path, "rb") as fh:  # where it starts: after the last newline before it
        pos = size - len(tail)
        while pos > 0:
            step = min(pos, 1 << 24)
            fh.seek(pos - step)
            found = fh.read(step).rfind(b"\n")
            if found >= 0:
                start = pos - step + found + 1
                break
            pos -= step
    lines = 0
    with open(path, "rb") as fh:  # its number: the newlines before it, plus one
        while fh.tell() < start:
            lines += fh.read(min(1 << 24, start - fh.tell())).count(b"\n")
    line = lines + 1
    raise FormatError(display, line, 1, _too_long(line, end - start))


def _too_long(line: int, length: int) -> str:
    return (f"line {line:,} is {length:,} bytes long, over the {MAX_LINE_BYTES:,} bytes a line "
            "may have (no trace field is that long: is the file cut off or binary at its end?)")


quoted = csvread.quoted  # plans name the file's columns in their SQL select lists
_literal = csvread.literal


class Streamed:
    """``Parsed.stream`` of a streamed file: its checked canonical rows as an Arrow stream.

    :meth:`reader` is scanned by one ``INSERT`` of the store's ingest transaction (one statement
    keeps DuckDB's memory flat; an insert per batch grows it). While it is read, ``rows``,
    ``ts_min`` and ``ts_max`` are counted; afterwards :meth:`warnings` holds the file's warnings.
    A batch the fast reader does not judge ends the stream with ``refused`` set to a
    :class:`~analytics.schema.StreamRefused` (DuckDB reports the stream's failure as its own
    error: the store raises ``refused`` instead).
    """

    def __init__(self, path: Path, display: str, table: str, plan: Plan,
                 checked: Callable[[], Parsed], replan: Callable[[], Plan] | None = None,
                 tail: tuple = (), lead: tuple = ()):
        self.path, self.display, self.table, self.plan = path, display, table, plan
        self.tail = tuple(tail)  # warnings after the plan's (--tz not applied)
        self.lead = tuple(lead)  # and before them (UTF-16 decoded, an index column dropped)
        self.checked = checked  # the checked reader's Parsed (after a StreamRefused)
        self.replan = replan or (lambda: plan)  # a fresh plan (its state) for a new reading
        self.refused: StreamRefused | None = None
        self.rows, self.ts_min, self.ts_max = 0, None, None
        self.columns: list[str] = []  # the canonical columns the stream carries (reader())
        self.direct = True  # direct_sql() may be tried (until it leaves the file to batches)
        self._started = False

    def _start(self) -> None:
        """Begin a reading from the first line: a file read again (the ingest transaction run
        again after another file's refusal) counts rows, time order and notes afresh."""
        if self._started:
            self.plan = self.replan()
        self._started = True
        self.rows, self.ts_min, self.ts_max, self.refused = 0, None, None, None

    def reader(self):
        """A ``pyarrow.RecordBatchReader`` of the file's rows in the table's canonical columns
        (computed by DuckDB's SQL in :mod:`analytics.store.csvread`, checked in polars, handed
        on as plain Arrow)."""
        import pyarrow as pa

        self._start()
        try:
            con, empty, source = csvread.open_batches(self._sql(), str(self.path), BATCH_ROWS)
        except csvread.ReadFailed as exc:
            if (again := self._to_fallback(exc)) is not None:
                raise again from exc
            self.refused = StreamRefused(self, str(exc))
            raise self.refused from exc
        names = [c for c in CANONICAL[self.table] if c in empty.columns]
        self.columns = names
        schema = _arrow(empty.select(names)).schema
        return pa.RecordBatchReader.from_batches(schema, self._batches(con, source, names))

    def warnings(self) -> tuple:
        """The file's warnings (once :meth:`reader` was read to its end, or the
        :meth:`direct_sql` insert went through)."""
        return (*self.lead, *self.plan.warnings(self.plan.state), *self.tail)

    def direct_sql(self, cur) -> str | None:
        """The file's canonical rows as one SQL query for the store's own ``INSERT ... SELECT``
        (its one parameter: the file's path), or None when the plan has no ``batch_only`` or
        the direct read already left the file to the batches. Sets :attr:`columns`.

        DuckDB reads the file with its parallel reader; a row with a cell the checked reader
        refuses (``__bad``: the cast to the canonical type would lose it) stops the statement
        with :data:`TO_CHECKED`. The rest is judged on the stored rows (:meth:`direct_check`).
        No row passes through Python (issue 15: 0.40x DuckDB's own ``read_csv`` for a 5 M-row
        Azure trace read batch by batch, polars and Arrow copies and a second compression at
        the checkpoint; ``bench/bench_ingest.py``).

        Raises
        ------
        StreamRefused
            DuckDB cannot bind the read (the checked reader judges the file).
        """
        if self.plan.batch_only is None or not self.direct:
            return None
        self._start()
        cells = self._sql()
        try:
            names = csvread.selected_columns(cur, cells, str(self.path))
        except csvread.ReadFailed as exc:
            self.refused = StreamRefused(self, str(exc))
            raise self.refused from exc
        self.columns = [c for c in CANONICAL[self.table] if c in names]
        return (f"SELECT {', '.join(self.columns)} FROM ({cells}) AS parsed WHERE CASE WHEN "
                f"__bad IS NOT false THEN error({_literal(TO_CHECKED)}) ELSE true END")

    def direct_check(self, cur, dataset_id: int, table: str, columns: list[str]) -> tuple:
        """Judge the rows the :meth:`direct_sql` insert stored under ``dataset_id`` in the
        stored ``table`` (in this transaction, in file order), whose canonical ``columns`` it
        kept, in one scan; returns ``(rows, ts_min, ts_max)``.

        Raises
        ------
        StreamRefused
            A value :data:`~analytics.schema.RULES` refuse or a time outside
            :data:`~analytics.schema.TS_ACCEPTED` (the checked reader names it), or no row;
            with ``batches`` set: a ``batch_only`` row or a time before the previous row's
            (the batches count the steps back and write the notes). The caller rolls back.
        """
        try:
            rows, ts_min, ts_max, bad, soft, *counted = csvread.stored_check(
                cur, table, dataset_id, self.table, columns, self.plan.batch_only,
                list(self.plan.direct_counts.values()))
        except csvread.ReadFailed as exc:
            raise self.direct_refused(exc) from exc
        self.plan.state.update(zip(self.plan.direct_counts, counted, strict=True))
        if bad or not rows:
            raise self.direct_refused(ValueError("a value the validity rules refuse"
                                                 if rows else "no data rows"))
        if soft:
            raise self.direct_refused(ValueError(f"{soft} {TO_BATCHES}s"), batches=True)
        return rows, ts_min, ts_max

    def direct_refused(self, exc: Exception, batches: bool = False) -> StreamRefused:
        """The :class:`~analytics.schema.StreamRefused` of a failed :meth:`direct_sql` insert
        or :meth:`direct_check` (``exc``): for the batch checks (``batches``: rows to note or
        count) or the checked reader. The direct read is off for this file afterwards."""
        if not batches and (again := self._to_fallback(exc)) is not None:
            return again
        self.direct = False
        self.refused = StreamRefused(self, f"direct read: {exc}", batches=batches)
        return self.refused

    def _to_fallback(self, exc: Exception) -> StreamRefused | None:
        """Where DuckDB could not convert a cell with the plan's own layout and the plan has a
        ``fallback`` (a reading without that layout): switch to it and ask for the file to be
        read again (a :class:`~analytics.schema.StreamRefused` with ``batches``: the ingest
        runs again), instead of leaving a large file to the checked reader. Else None."""
        fallback = self.plan.fallback
        said = str(exc).split("\n-- failing SQL:", 1)[0]  # DuckDB's words, not the SQL's
        if fallback is None or not any(m in said for m in _CONVERSION):
            return None
        self.replan, self.plan, self.direct = fallback, fallback(), True
        self.refused = StreamRefused(self, f"read again without the layout: {exc}",
                                     batches=True)
        return self.refused

    def _batches(self, con, source, names: list[str]):
        try:
            for batch in source:
                frame = pl.from_arrow(batch).with_row_index(ROW, self.rows)
                out = self._check(frame, names)
                self.rows += frame.height
                self._span(out)
                yield from _arrow(out).to_batches()
            if self.rows == 0:
                raise StreamRefused(self, "no data rows")
        except StreamRefused as exc:
            self.refused = exc
            raise
        except Exception as exc:  # DuckDB's reader error, or anything unforeseen: checked path
            if (again := self._to_fallback(exc)) is not None:
                raise again from exc
            self.refused = StreamRefused(self, f"{type(exc).__name__}: {exc}")
            raise self.refused from exc
        finally:
            con.close()

    def _sql(self) -> str:
        # the compression said, not guessed from the name (an upload's generated name)
        return csvread.read_csv_sql(self.plan.columns, self.plan.select,
                                    self.plan.timestampformat, is_gzip(self.path))

    def _check(self, frame: pl.DataFrame, names: list[str]) -> pl.DataFrame:
        """The canonical columns of ``frame``; raise StreamRefused unless the checked reader
        would accept every row: no ``__bad`` cell, the format's row checks, the validity rules
        and the time range."""
        if frame["__bad"].fill_null(True).any():
            raise StreamRefused(self, "a cell the checked reader refuses")
        try:
            self.plan.rows(frame, self.plan.state)
            out = frame.select(names)
            _, notes = check_rules(out, self.table, self.display)  # as parse_file applies them
        except FormatError as exc:
            raise StreamRefused(self, str(exc)) from exc
        if notes or ts_out_of_range(out):
            raise StreamRefused(self, "a value the validity rules refuse or note")
        return out

    def _span(self, out: pl.DataFrame) -> None:
        if "ts" in out.columns and out.height:
            low, high = out["ts"].min(), out["ts"].max()
            self.ts_min = low if self.ts_min is None else min(self.ts_min, low)
            self.ts_max = high if self.ts_max is None else max(self.ts_max, high)

#: How DuckDB says a cell did not convert (a layout that does not fit every row)
_CONVERSION = ("Conversion Error", "Could not convert", "Could not parse")

#: Why a direct read (:meth:`Streamed.direct_sql`) stopped: the file goes to the checked reader
#: (a row it would refuse: DuckDB's ``error()`` in the INSERT) or to the batch checks (a row to
#: note or count, found on the stored rows).
TO_CHECKED = "headroom: a row for the checked reader"
TO_BATCHES = "row for the batch check"


def _arrow(frame: pl.DataFrame):
    """``frame`` as Arrow with plain (not view) strings, a copy of each batch: handing DuckDB's
    own batches (or polars' string views) to the INSERT kept every batch alive until it ended
    (1.7 GB at 20 M rows instead of under 1 GB)."""
    return frame.to_arrow(compat_level=pl.CompatLevel.oldest())


def streamed_parsed(plugin, path: Path, display: str, head: str, opts,
                    checked: Callable[[], Parsed], expanded: Expanded | None = None,
                    tail: tuple = (), lead: tuple = ()) -> Parsed | None:
    """The :class:`~analytics.schema.Parsed` of a streamed file (rows read later, in the store's
    transaction), or None when ``plugin`` has no fast path for this file (then the caller reads
    it with the checked reader). ``expanded``: what :func:`~analytics.ingest.rawfile.
    check_decompressed_size` found (a gzip file's size and last line); ``tail``: warnings to
    give after the plan's (as the checked reader gives them after the format's)."""
    if not hasattr(plugin, "stream_plan") or not eligible(path, head, opts, expanded):
        return None
    plan = plugin.stream_plan(display, head, opts)
    if plan is None:
        return None
    check_last_line(path, display, expanded if is_gzip(path) else None)
    table = plan.table or plugin.TABLE
    empty = pl.DataFrame(schema=CANONICAL[table])
    return Parsed(table, plugin.NAME, empty, display, plan.resolution_s, (),
                  assumptions=plan.assumptions, sources=dict(plan.sources),
                  stream=Streamed(path, display, table, plan, checked,
                                  lambda: plugin.stream_plan(display, head, opts), tail, lead))


def carry_monotone(batch: pl.DataFrame, state: dict, display: str, max_backstep_s: float,
                   column: str) -> None:
    """Time-order check of one streamed batch, carried across batches: the batch's ``ts`` is
    checked after the previous batch's last row (``state["last"]``), and the steps back are
    summed into ``state["back"]``
    (:func:`analytics.ingest.formats._common.check_monotone`; raises its FormatError)."""
    from analytics.ingest.formats._common import check_monotone

    order = batch.select(ROW, "ts")
    if "last" in state:
        order = pl.concat([state["last"], order])
    state["back"] = state.get("back", 0) + check_monotone(order, display, max_backstep_s, column)
    state["last"] = order.tail(1)
