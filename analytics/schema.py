"""Canonical table schemas: the column names and types every parser emits and the store keeps.

This module owns :data:`COLUMNS` (table -> column -> SQL type) and :data:`CANONICAL` (the same
as polars dtypes, built on first use so that the store's readers do not import polars),
:data:`REQUIRED` (the columns a canonical file must carry), :func:`conform`, the one place a
frame is brought to a table's canonical columns (order, dtype, absent optional columns empty),
:class:`Parsed` (a file's rows on their way from a format to the store). Parsers
(:mod:`analytics.ingest.formats`) and the store (:mod:`analytics.store.migrations`, which builds
its DDL from :data:`COLUMNS`) both use it, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

#: Canonical tables: column -> SQL type (``ts`` naive UTC). ``store`` builds its DDL from this and
#: the parsers their polars dtypes (:data:`CANONICAL`, via :data:`POLARS_OF_SQL`), so they cannot
#: drift apart. Plain strings, so that reading the store (``headroom datasets``) does not import
#: polars (issue 15). Units are in the names.
COLUMNS: dict[str, dict[str, str]] = {
    "requests": {
        "ts": "TIMESTAMP", "model": "VARCHAR", "prompt_tokens": "BIGINT",
        "completion_tokens": "BIGINT", "failed": "BOOLEAN", "session_id": "VARCHAR",
        "latency_s": "DOUBLE", "gpu_s": "DOUBLE",
    },
    "demand_series": {
        "ts": "TIMESTAMP", "bin_s": "INTEGER", "tokens": "DOUBLE", "requests": "BIGINT",
    },
    "carbon_intensity": {
        "site": "VARCHAR", "ts": "TIMESTAMP", "gco2_per_kwh": "DOUBLE", "basis": "VARCHAR",
    },
    "weather": {"site": "VARCHAR", "ts": "TIMESTAMP", "temp_c": "DOUBLE",
                "rh_pct": "DOUBLE"},
    "prices": {"site": "VARCHAR", "ts": "TIMESTAMP", "usd_per_mwh": "DOUBLE"},
    "telemetry": {
        "ts": "TIMESTAMP", "host": "VARCHAR", "gpu_id": "INTEGER", "power_w": "DOUBLE",
        "sm_active": "DOUBLE", "mem_used_mib": "DOUBLE", "temp_c": "DOUBLE",
        "energy_j": "DOUBLE", "gpu_util_pct": "DOUBLE", "sm_clock_mhz": "DOUBLE",
        "mem_clock_mhz": "DOUBLE", "throttle_reasons": "BIGINT",
        # the GPU's UUID (nvidia-smi ``uuid``, DCGM ``UUID`` label), else ``pci:`` + its PCI bus
        # id; empty = not reported. A GPU is (host, gpu_id, gpu_uuid): logs of several hosts
        # share indices
        "gpu_uuid": "VARCHAR",
    },
    "jobs": {
        "job_id": "VARCHAR", "submit_ts": "TIMESTAMP", "start_ts": "TIMESTAMP",
        "end_ts": "TIMESTAMP", "n_gpus": "INTEGER", "gpu_kind": "VARCHAR",
        "state": "VARCHAR", "exit_code": "INTEGER", "user_hash": "VARCHAR",
        # thousandths of a GPU requested in total (GPU-sharing pods); empty = n_gpus * 1000
        "gpu_milli": "INTEGER",
        # the job's GPUs are MIG slices (a ``gpu_kind`` such as ``a100_3g.20gb``); empty = unknown
        "mig_slice": "BOOLEAN",
        # run time as the source reports it (Slurm ``Elapsed``), seconds; empty = not reported
        "elapsed_s": "DOUBLE",
    },
    "bench_runs": {
        "source": "VARCHAR", "task": "VARCHAR", "hardware": "VARCHAR", "gpu_mem_gb": "DOUBLE",
        "n_gpus": "INTEGER", "tp": "INTEGER", "pp": "INTEGER", "precision": "VARCHAR",
        "framework": "VARCHAR", "model": "VARCHAR", "params_b": "DOUBLE",
        "active_params_b": "DOUBLE", "in_len": "DOUBLE", "out_len": "DOUBLE",
        "concurrency": "DOUBLE", "throughput_tok_s": "DOUBLE", "ttft_ms": "DOUBLE",
        "itl_ms": "DOUBLE", "latency_s": "DOUBLE", "power_w": "DOUBLE",
        "energy_per_token_j": "DOUBLE", "failed": "BOOLEAN",
        # offered request rate, req/s (``vllm bench serve --request-rate``); empty = not set or
        # unbounded. ``concurrency_measured``: ``concurrency`` was not configured but measured
        # (Little's law, throughput x mean latency); empty/False = the configured value
        "request_rate": "DOUBLE", "concurrency_measured": "BOOLEAN",
        # requests of the run that failed (``vllm bench serve`` ``failed``, vLLM PR #26478) and
        # their share of all sent; ``failed`` (the run) is true only above
        # :data:`analytics.config.HEAVY_FAILURE_SHARE`. Figures count the successes only.
        "failed_requests": "INTEGER", "failed_share": "DOUBLE",
        # the tail percentiles the result files carry (issue 30 item 1; ``ttft_ms``, ``itl_ms``
        # and ``latency_s`` are medians): TTFT and ITL p90 / p99 (ms), TPOT median and p99 (ms),
        # end-to-end p90 / p99 (s); empty where a file does not write them
        "ttft_p90_ms": "DOUBLE", "ttft_p99_ms": "DOUBLE", "itl_p90_ms": "DOUBLE",
        "itl_p99_ms": "DOUBLE", "tpot_ms": "DOUBLE", "tpot_p99_ms": "DOUBLE",
        "latency_p90_s": "DOUBLE", "latency_p99_s": "DOUBLE",
    },
    "reference_cdf": {
        "source": "VARCHAR", "cluster": "VARCHAR", "metric": "VARCHAR",
        "cdf_percent": "DOUBLE", "value": "DOUBLE",
    },
}

#: The polars dtype each SQL type of :data:`COLUMNS` is parsed to (``TIMESTAMP``: naive
#: microseconds holding UTC), by name so that this module does not import polars.
POLARS_OF_SQL = {"TIMESTAMP": ("Datetime", "us"), "VARCHAR": ("String",), "BIGINT": ("Int64",),
                 "INTEGER": ("Int32",), "DOUBLE": ("Float64",), "BOOLEAN": ("Boolean",)}


def polars_schema(table: str) -> dict[str, pl.DataType]:
    """``table``'s canonical columns as ``{column: polars dtype}`` (from :data:`COLUMNS`).

    Raises KeyError for a table that is not canonical."""
    import polars as pl

    def dtype(sql: str):
        name, *args = POLARS_OF_SQL[sql]
        return getattr(pl, name)(*args) if args else getattr(pl, name)

    return {c: dtype(t) for c, t in COLUMNS[table].items()}


def __getattr__(name: str):
    """``CANONICAL`` (table -> column -> polars dtype) is built on first use, importing polars
    then: the parsers use it, the store (:data:`COLUMNS`) does not (PEP 562)."""
    if name == "CANONICAL":
        built = {t: polars_schema(t) for t in COLUMNS}
        globals()["CANONICAL"] = built
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Rule:
    """What a value of a canonical column may be (empty cells always pass).

    Attributes
    ----------
    low, high : closed bounds, None = open
    integer : a whole number (a count: a fractional one is refused, never truncated)
    """

    low: float | None = None
    high: float | None = None
    integer: bool = False


_COUNT, _NONNEG = Rule(low=0, integer=True), Rule(low=0)

#: Validity rules per canonical column, the one place they are stated: every parsed file passes
#: them before it is stored (:func:`analytics.ingest.csvcheck.check_rules`), whatever its format.
#: Every float must also be finite; where a source writes NaN for "no reading" (telemetry,
#: benchmark exports) it becomes empty with a warning naming line and column
#: (:data:`NAN_AS_EMPTY`), elsewhere the file is refused.
RULES: dict[str, dict[str, Rule]] = {
    "requests": {"prompt_tokens": _COUNT, "completion_tokens": _COUNT, "latency_s": _NONNEG,
                 "gpu_s": _NONNEG},
    "demand_series": {"bin_s": Rule(low=1, integer=True), "tokens": _NONNEG,
                      "requests": _COUNT},
    "carbon_intensity": {"gco2_per_kwh": _NONNEG},
    "weather": {"temp_c": Rule(low=-90, high=65), "rh_pct": Rule(low=0, high=100)},
    "prices": {},  # prices can be negative (renewable surplus hours)
    "telemetry": {"power_w": _NONNEG, "energy_j": _NONNEG, "sm_active": Rule(low=0, high=1),
                  "gpu_util_pct": Rule(low=0, high=100), "mem_used_mib": _NONNEG,
                  "temp_c": Rule(low=-40, high=150), "sm_clock_mhz": _NONNEG,
                  "mem_clock_mhz": _NONNEG},
    "jobs": {"n_gpus": _COUNT, "gpu_milli": _COUNT, "elapsed_s": _NONNEG},
    "bench_runs": {c: _NONNEG for c in (
        "gpu_mem_gb", "params_b", "active_params_b", "in_len", "out_len", "concurrency",
        "throughput_tok_s", "ttft_ms", "itl_ms", "latency_s", "power_w", "energy_per_token_j",
        "request_rate", "ttft_p90_ms", "ttft_p99_ms", "itl_p90_ms", "itl_p99_ms", "tpot_ms",
        "tpot_p99_ms", "latency_p90_s", "latency_p99_s")} | {"n_gpus": _COUNT, "tp": _COUNT, "pp": _COUNT,
                            "failed_requests": _COUNT, "failed_share": Rule(low=0, high=1)},
    "reference_cdf": {"cdf_percent": Rule(low=0, high=100)},
}

#: Tables whose sources write NaN / Inf for "no reading": such a value is stored empty with a
#: warning; in the other tables it refuses the file.
NAN_AS_EMPTY = ("telemetry", "bench_runs")

#: Columns a canonical file must have for each table (the rest are optional).
REQUIRED: dict[str, tuple[str, ...]] = {
    "requests": ("ts", "prompt_tokens", "completion_tokens"),
    "demand_series": ("ts", "bin_s", "tokens"),
    "carbon_intensity": ("site", "ts", "gco2_per_kwh"),
    "weather": ("site", "ts", "temp_c"),
    "prices": ("site", "ts", "usd_per_mwh"),
    "telemetry": ("ts", "gpu_id", "power_w"),
}


#: Timestamps a store accepts, [first, end): traces, telemetry, job logs and grid-year data are
#: from this range; a value outside it is a unit or parsing slip (a year 0001 or 3000 would make
#: a 5-minute grid of millions of bins), refused at ingest naming line and column.
TS_ACCEPTED = (datetime(1980, 1, 1), datetime(2100, 1, 1))

#: Most line numbers a :class:`Note` keeps (its ``count`` keeps the total).
NOTE_LINES_KEPT = 20


class Note(str):
    """An ingest warning that did not stop the ingest: what, in which column, on which lines.

    A ``str`` (the full sentence, e.g. ``"lines 3, 7, column power.draw: [N/A] read as empty
    (2 rows)"``) so it prints, joins and searches like any message, and carries the parts the
    ingest report groups and counts.

    Attributes
    ----------
    message : what happened, without the place (the group key of the report)
    column : column name as written in the file, or None
    lines : 1-based physical lines (header = line 1), at most :data:`NOTE_LINES_KEPT`
    count : rows affected in all (``len(lines)`` before truncation by default); None = not a
        per-row warning
    """

    message: str
    column: str | None
    lines: tuple[int, ...]
    count: int | None

    def __new__(cls, message: str, *, column: str | None = None, lines=(),
                count: int | None = None) -> Note:
        lines = tuple(int(x) for x in lines)
        count = count if count is not None else (len(lines) or None)
        kept = lines[:NOTE_LINES_KEPT]
        where, shown = [], kept[:5]  # the sentence names five; ``lines`` keeps more
        if shown:
            more = ", ..." if max(count or 0, len(kept)) > len(shown) else ""
            where.append(f"line {shown[0]}" if len(shown) == 1 and not more
                         else "lines " + ", ".join(map(str, shown)) + more)
        if column is not None:
            where.append(f"column {column}")
        text = (", ".join(where) + ": " if where else "") + message
        if count and count > 1:
            text += f" ({count:,} rows)"
        obj = super().__new__(cls, text)
        obj.message, obj.column, obj.lines, obj.count = message, column, kept, count
        return obj

    def __reduce__(self):  # pickling (Streamlit caches) keeps the parts
        return (_make_note, (self.message, self.column, self.lines, self.count))

    def as_dict(self) -> dict:
        """``{"message", "column", "lines", "count", "text"}`` for JSON reports."""
        return {"message": self.message, "column": self.column, "lines": list(self.lines),
                "count": self.count, "text": str(self)}


def _make_note(message, column, lines, count) -> Note:
    return Note(message, column=column, lines=lines, count=count)


def note_dict(warning: str) -> dict:
    """A warning (a :class:`Note` or a plain ``str``) as the ingest report's JSON object."""
    if isinstance(warning, Note):
        return warning.as_dict()
    return {"message": str(warning), "column": None, "lines": [], "count": None,
            "text": str(warning)}


@dataclass(frozen=True)
class Parsed:
    """A parsed file, ready for ``store.ingest``.

    Attributes
    ----------
    table : canonical table the rows go to (``requests``, ``demand_series``, ...)
    format : format name that parsed it
    frame : polars DataFrame with exactly the canonical columns of ``table`` (no dataset_id);
        ``ts`` is a naive ``Datetime('us')`` holding UTC.
    source : the file name as given
    resolution_s : finest time resolution the data carries (seconds), used to refuse finer grids
    warnings : things a user should know that did not stop the ingest: plain ``str`` for a
        file-wide remark, :class:`Note` for one that names column and lines
    source_tz : IANA zone the file's local times (written without an offset) were read in and
        converted from (``ParseOptions.tz``), None when none was applied; kept in the ledger
    stream : None, or the rows still to be read (a large file on the streamed path,
        :class:`analytics.ingest.fastcsv.Streamed`; ``frame`` is then empty): the store's
        ingest transaction scans ``stream.reader()`` (an Arrow stream of canonical rows, read in
        batches) with one INSERT and adds ``stream.warnings()`` after ``warnings``; it counts
        ``rows``, ``ts_min``, ``ts_max`` and sets ``refused`` (a :class:`StreamRefused`) when a
        batch needs the checked reader; where ``stream.direct_sql(cur)`` gives a query, the
        store inserts from it instead and ``stream.direct_check`` judges the stored rows
    sources : canonical field -> the column (or field, metric, key) of the file it was read
        from, as the file names it (``{"power_w": "power.draw.average [W]"}``); a field the
        reader filled without a column (a constant, a default) is absent. Kept per file in the
        ledger (``dataset_files.sources``) and shown by the ingest report, ``summary`` and the
        Data page (issue 27).
    assumptions : what the reader had to assume because the file does not say it, one plain
        sentence each: a start time (``t0``), an interval, a time zone, a basis, a hardware.
        Kept per file with ``sources``.
    lines : the physical line of the file each row of ``frame`` came from (a polars Series in
        ``frame``'s order, which a format may have sorted), or None when unknown (a streamed
        file, a JSON document): a refusal after parsing (an appended row that conflicts)
        names the line in the file as given, not the row's place after sorting.
    """

    table: str
    format: str
    frame: pl.DataFrame
    source: str
    resolution_s: float
    warnings: tuple[str, ...] = field(default_factory=tuple)
    source_tz: str | None = None
    stream: Any = None
    sources: dict = field(default_factory=dict)
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    lines: Any = None


class StreamRefused(Exception):
    """A streamed file (:attr:`Parsed.stream`) met a value the fast reader does not judge (a
    bad cell, a ragged row, a value to refuse): the ingest transaction rolls back and the file
    is read again with the checked reader, which names line, column and reason.
    ``stream`` is the refusing :attr:`Parsed.stream`; ``batches``: the file is read again on
    the streamed path batch by batch instead (its direct read met a row to note or count)."""

    def __init__(self, stream: object, why: str = "", batches: bool = False):
        self.stream, self.batches = stream, batches
        super().__init__(why)


def ts_out_of_range(frame: pl.DataFrame) -> tuple[str, int, object] | None:
    """``(column, row index, value)`` of the first timestamp of ``frame`` (any ``Datetime``
    column) outside :data:`TS_ACCEPTED`, or None when all are inside (empty cells pass)."""
    import polars as pl

    first, end = TS_ACCEPTED
    for col, dtype in frame.schema.items():
        if isinstance(dtype, pl.Datetime):
            bad = ((frame[col] < first) | (frame[col] >= end)).fill_null(False)
            if bad.any():
                idx = int(bad.arg_true()[0])
                return col, idx, frame[col][idx]
    return None


def conform(frame: pl.DataFrame, table: str,
            defaults: Mapping[str, object] | None = None) -> pl.DataFrame:
    """Select ``table``'s canonical columns in canonical order, cast to their dtypes.

    Parameters
    ----------
    frame : polars DataFrame with some or all canonical columns of ``table`` (extra columns are
        dropped).
    table : a key of :data:`CANONICAL`.
    defaults : value for a canonical column the frame lacks (e.g. ``failed=False``); columns
        absent from both the frame and ``defaults`` are empty (null).

    Returns
    -------
    DataFrame with exactly the columns of ``CANONICAL[table]``, same height as ``frame``.

    Raises
    ------
    KeyError
        ``table`` is not a canonical table.
    polars.exceptions.InvalidOperationError
        A present column cannot be cast to its canonical dtype.
    """
    import polars as pl

    defaults = defaults or {}
    cols = []
    for name, dtype in polars_schema(table).items():
        if name in frame.columns:
            cols.append(pl.col(name).cast(dtype))
        elif name in defaults:
            cols.append(pl.lit(defaults[name]).cast(dtype).alias(name))
        else:
            cols.append(pl.lit(None, dtype).alias(name))
    return frame.select(cols)


#: Where a canonical table's rows are kept when that is not the table of its name (migrations
#: 13 and 18, issues 15 and 28): ``requests`` is a view over ``requests_full`` (every column;
#: where every frame and batch is written) and narrower tables for rows a direct read
#: (:meth:`analytics.ingest.fastcsv.Streamed.direct_sql`) fills only in part:
#: ``requests_tokens`` (time and token counts; an Azure LLM trace) and ``requests_models``
#: (those, the model and the failed flag; BurstGPT v1, a canonical CSV with a model column).
#: DuckDB spends CPU appending and checkpointing every column a file leaves empty: 0.6-0.9 s
#: per 5 M rows (of 2.1-2.7 s) for the five of an Azure trace, 0.7 s (of 3.0 s) for the three
#: of a BurstGPT one, most of it for the empty VARCHARs (``bench/bench_ingest.py``). Readers see
#: one ``requests``; writers name the stored tables. :data:`NARROW`: canonical table -> its
#: narrow tables, narrowest first, each (stored table, its columns after ``dataset_id``, the
#: other columns' values in the view as SQL constants; absent: NULL).
STORED_IN: dict[str, str] = {"requests": "requests_full"}
NARROW: dict[str, tuple[tuple[str, tuple[str, ...], dict[str, str]], ...]] = {
    "requests": (("requests_tokens", ("ts", "prompt_tokens", "completion_tokens"),
                  {"failed": "false"}),
                 ("requests_models", ("ts", "model", "prompt_tokens", "completion_tokens",
                                      "failed"), {})),
}


def stored_table(table: str) -> str:
    """The stored table rows of canonical ``table`` are written to (itself, unless a view)."""
    return STORED_IN.get(table, table)


def stored_tables(table: str) -> list[str]:
    """Every stored table holding rows of canonical ``table`` (what a delete must reach)."""
    return [stored_table(table), *(entry[0] for entry in NARROW.get(table, ()))]


def narrow_for(table: str, columns) -> tuple[str, tuple[str, ...], dict[str, str]] | None:
    """The first of :data:`NARROW`'s tables for ``table`` that keeps rows filling exactly
    ``columns``: every column is one it stores or keeps as a constant, and every constant's
    column is among them (so the insert checks it; a column absent from both is NULL in the
    view, as in ``requests_full``). None when no narrow table fits."""
    cols = set(columns)
    for entry in NARROW.get(table, ()):
        if cols <= {*entry[1], *entry[2]} and set(entry[2]) <= cols:
            return entry
    return None
