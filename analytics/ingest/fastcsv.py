"""Streamed ingest of large request traces: DuckDB reads the CSV, headroom checks each batch.

Issue 15: a 5 M-row trace read whole by polars, checked in several passes, copied to Arrow and
then to DuckDB cost 1.6-4.3x the CPU of DuckDB's own ``read_csv`` and 2 GB of memory at 20 M
rows. For a large plain CSV (over :data:`FAST_MIN_BYTES`) of a format with a ``stream_plan``
(BurstGPT, Azure LLM 2023 / 2024), DuckDB's ``read_csv`` reads the file with explicit column
types (``auto_detect=false``, strict rows) in batches of :data:`BATCH_ROWS` rows; SQL marks
every cell the checked reader would refuse (an empty required cell, a fractional or non-finite
count, a time not in the format's layout) in one ``__bad`` column; each batch then passes the
format's own checks (the time order and the warnings carried from batch to batch) and is written
to the store by one INSERT inside the ingest transaction. Python holds one batch at a time, and
DuckDB writes and commits the rows under a small memory limit
(:data:`analytics.store.writes.STREAM_INSERT_MEMORY`), so memory hardly grows with the file
(peak RSS of the CLI: 365 MiB at 5 M BurstGPT rows, 444 MiB at 20 M, against 850 MiB and
1.95 GB before streaming; ``bench/bench_ingest.py``).

Anything the fast reader does not judge raises :class:`~analytics.schema.StreamRefused`: the
transaction rolls back (the store is as it was) and the file is read again by the checked reader
(:func:`analytics.ingest.formats.parse_file`), which names the first bad line and column with
the messages it always gave. So the fast path only ever accepts what the checked path accepts,
except DuckDB's lenient spellings of numbers: a whole number written ``2.0`` or ``1e3`` in a
count column, and an empty extra field at the end of a row (``...,log,``), are read as the
value instead of being refused.

Smaller files, gzip, UTF-16 / byte-order-marked text, a pandas index column and ``--tz`` keep
the checked reader (:mod:`analytics.ingest.csvcheck`), whose row-shape walk covers files up to
:data:`FAST_MIN_BYTES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from analytics.ingest.csvcheck import STRUCTURE_WALK_MAX_BYTES
from analytics.ingest.rawfile import ROW, FormatError, is_gzip
from analytics.ingest.rowcheck import check_rules
from analytics.schema import CANONICAL, Parsed, StreamRefused, ts_out_of_range

#: Smallest file (bytes) read on the streamed path: the checked reader walks every row of
#: smaller files (:data:`analytics.ingest.csvcheck.STRUCTURE_WALK_MAX_BYTES`).
FAST_MIN_BYTES = STRUCTURE_WALK_MAX_BYTES

#: Rows per batch: about 30 MB of polars + Arrow memory for a BurstGPT batch.
BATCH_ROWS = 1 << 18

#: Memory DuckDB's CSV reader may hold (its buffers; the batches are on top). It reads with one
#: thread: the store's INSERT uses the others, and a parallel reader ran ahead of the insert by
#: a few hundred MB at 20 M rows.
READER_MEMORY = "128MB"


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
    """

    columns: dict[str, str]
    select: str
    rows: Callable[[pl.DataFrame, dict], None]
    warnings: Callable[[dict], tuple]
    resolution_s: float
    state: dict = field(default_factory=dict)


def eligible(path: Path, head: str, opts) -> bool:
    """Whether ``path`` goes the streamed way: a plain (not gzip) file of at least
    :data:`FAST_MIN_BYTES` whose head is UTF-8 text without a byte-order mark, and no ``--tz``."""
    from analytics.ingest.encoding import source_codec
    from analytics.ingest.leading_index import is_index_column

    if opts.tz is not None or is_gzip(path) or Path(path).stat().st_size < FAST_MIN_BYTES:
        return False
    with open(path, "rb") as fh:
        if fh.read(3) == b"\xef\xbb\xbf":
            return False
    return head != "PAR1" and source_codec(path) is None and not is_index_column(head)


def quoted(name: str) -> str:
    """``name`` as a DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


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
                 checked: Callable[[], Parsed]):
        self.path, self.display, self.table, self.plan = path, display, table, plan
        self.checked = checked  # the checked reader's Parsed (after a StreamRefused)
        self.refused: StreamRefused | None = None
        self.rows, self.ts_min, self.ts_max = 0, None, None
        self.columns: list[str] = []  # the canonical columns the stream carries (reader())

    def reader(self):
        """A ``pyarrow.RecordBatchReader`` of the file's rows in the table's canonical columns
        (computed by DuckDB's SQL, checked in polars, handed on as plain Arrow)."""
        import duckdb
        import pyarrow as pa

        con = duckdb.connect(config={"memory_limit": READER_MEMORY, "threads": 1})
        try:
            con.execute("SET TimeZone = 'UTC'")
            con.execute("SET enable_progress_bar = false")
            source = con.sql(self._sql(), params=[str(self.path)]).to_arrow_reader(BATCH_ROWS)
        except duckdb.Error as exc:
            con.close()
            self.refused = StreamRefused(self, f"DuckDB: {exc}")
            raise self.refused from exc
        names = [c for c in CANONICAL[self.table] if c in source.schema.names]
        self.columns = names
        schema = _arrow(pl.from_arrow(source.schema.empty_table()).select(names)).schema
        return pa.RecordBatchReader.from_batches(schema, self._batches(con, source, names))

    def warnings(self) -> tuple:
        """The file's warnings (once :meth:`reader` was read to its end)."""
        return self.plan.warnings(self.plan.state)

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
            self.refused = StreamRefused(self, f"{type(exc).__name__}: {exc}")
            raise self.refused from exc
        finally:
            con.close()

    def _sql(self) -> str:
        cols = ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in self.plan.columns.items())
        return (f"SELECT {self.plan.select} FROM read_csv(?, header = true, auto_detect = false, "
                f"delim = ',', quote = '\"', escape = '\"', strict_mode = true, "
                f"null_padding = false, columns = {{{cols}}}) AS cells")

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

def _arrow(frame: pl.DataFrame):
    """``frame`` as Arrow with plain (not view) strings, a copy of each batch: handing DuckDB's
    own batches (or polars' string views) to the INSERT kept every batch alive until it ended
    (1.7 GB at 20 M rows instead of under 1 GB)."""
    return frame.to_arrow(compat_level=pl.CompatLevel.oldest())


def streamed_parsed(plugin, path: Path, display: str, head: str, opts,
                    checked: Callable[[], Parsed]) -> Parsed | None:
    """The :class:`~analytics.schema.Parsed` of a streamed file (rows read later, in the store's
    transaction), or None when ``plugin`` has no fast path for this file (then the caller reads
    it with the checked reader)."""
    if not hasattr(plugin, "stream_plan") or not eligible(path, head, opts):
        return None
    plan = plugin.stream_plan(display, head, opts)
    if plan is None:
        return None
    empty = pl.DataFrame(schema=CANONICAL[plugin.TABLE])
    return Parsed(plugin.TABLE, plugin.NAME, empty, display, plan.resolution_s, (),
                  stream=Streamed(path, display, plugin.TABLE, plan, checked))


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
