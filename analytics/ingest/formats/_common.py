"""Shared machinery of the format parsers: errors with positions, checked CSV reading, checks.

Line numbers are 1-based and count the header as a line, so the first data row of a plain CSV is
line 2. Column is the column's name as written in the file header (or its field number).
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

import polars as pl

ROW = "__row"  # 0-based data-row index carried through parsing to report line numbers


class FormatError(ValueError):
    """A file was rejected; says where and why.

    Attributes
    ----------
    file : str   name of the file as the user gave it
    line : int   1-based line number (header = line 1)
    column : str or int   column name, or 1-based field number
    reason : str
    """

    def __init__(self, file: str, line: int, column: str | int, reason: str):
        self.file, self.line, self.column, self.reason = file, line, column, reason
        super().__init__(f"{file}: line {line}, column {column}: {reason}")

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "column": self.column, "reason": self.reason}


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
    warnings : things a user should know that did not stop the ingest
    """

    table: str
    format: str
    frame: pl.DataFrame
    source: str
    resolution_s: float
    warnings: tuple[str, ...] = field(default_factory=tuple)


class Format(Protocol):
    """The plug-in form every input format takes (a class; its methods are static).

    Attributes
    ----------
    NAME : str   format name (``--format``, the ledger's ``format`` column)
    TABLE : str  canonical table it fills (``"any"`` for the canonical-schema reader)
    """

    NAME: ClassVar[str]
    TABLE: ClassVar[str]

    @staticmethod
    def detect(name: str, head: str) -> bool:
        """Whether the file called ``name`` whose first 64 KiB of text are ``head`` is this
        format (``head`` is ``"PAR1"`` for Parquet). Never raises."""

    @staticmethod
    def parse(path: Path, display: str, opts) -> Parsed:
        """Parse the file at ``path`` (messages name it ``display``) with ``ParseOptions``
        ``opts``. Raises FormatError(file, line, column, reason) for invalid input."""


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def is_parquet(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == b"PAR1"


def read_head(path: Path, display: str, nbytes: int = 65536) -> str:
    """First ``nbytes`` of the (decompressed) file as text.

    Raises
    ------
    FormatError
        Empty file, unreadable gzip, or bytes that are not UTF-8 text (binary garbage).
        Parquet files return ``"PAR1"``.
    """
    path = Path(path)
    if path.stat().st_size == 0:
        raise FormatError(display, 1, 1, "empty file")
    if is_parquet(path):
        return "PAR1"
    try:
        if is_gzip(path):
            with gzip.open(path, "rb") as fh:
                raw = fh.read(nbytes)
        else:
            with open(path, "rb") as fh:
                raw = fh.read(nbytes)
    except (OSError, EOFError, zlib.error) as exc:
        raise FormatError(display, 1, 1, f"gzip stream is unreadable: {exc}") from exc
    if not raw.strip():
        raise FormatError(display, 1, 1, "empty file (no data after decompression)")
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise FormatError(display, line, 1, "binary data (NUL byte), not a text trace")
    if raw.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte-order mark
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start > len(raw) - 4:  # a multi-byte character cut by the head window
            return raw[: exc.start].decode("utf-8")
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise FormatError(display, line, col, "bytes are not UTF-8 text (binary data?)") from exc


def header_fields(head: str, skip_lines: int = 0) -> list[str]:
    """Fields of the header line (after ``skip_lines``), as the csv module reads them."""
    lines = head.splitlines()
    if len(lines) <= skip_lines:
        return []
    return next(csv.reader([lines[skip_lines]]))


def check_gzip_stream(path: Path, display: str) -> None:
    """Read a gzip file to its end; raise FormatError at the line where it breaks off."""
    lines = 0
    try:
        with gzip.open(path, "rb") as fh:
            while chunk := fh.read(1 << 16):
                lines += chunk.count(b"\n")
    except (OSError, EOFError, zlib.error) as exc:
        raise FormatError(
            display, lines + 1, 1,
            f"gzip stream is truncated or corrupt after {lines} complete lines ({exc})",
        ) from exc


def _open_text(path: Path):
    if is_gzip(path):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def locate_structure_error(path: Path, display: str, skip_lines: int = 0) -> None:
    """Walk the CSV with the csv module and raise at the first ragged row or bad byte.

    Called only after a fast reader has failed, to turn its message into a position.
    """
    if is_gzip(path):
        check_gzip_stream(path, display)
    line = 0
    try:
        with _open_text(path) as fh:
            for _ in range(skip_lines):
                fh.readline()
                line += 1
            reader = csv.reader(fh)
            width = None
            for row in reader:
                line = skip_lines + reader.line_num
                if not row:
                    continue
                if width is None:
                    width = len(row)
                elif len(row) != width:
                    raise FormatError(
                        display, line, min(len(row), width) + 1,
                        f"row has {len(row)} fields, header has {width}",
                    )
    except UnicodeDecodeError as exc:
        bad_line, bad_col = _locate_bad_utf8(path)
        raise FormatError(display, bad_line, bad_col, "bytes are not UTF-8 text") from exc
    except csv.Error as exc:
        raise FormatError(display, line + 1, 1, f"malformed CSV: {exc}") from exc


def _locate_bad_utf8(path: Path) -> tuple[int, int]:
    """Line and field number (1-based; fields counted by commas) of the first byte that is not
    valid UTF-8."""
    opener = gzip.open if is_gzip(path) else open
    with opener(path, "rb") as fh:
        data = fh.read()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        return line, data.count(b",", line_start, exc.start) + 1
    return 1, 1


_KIND = {pl.Int64: "integer", pl.Float64: "number", pl.String: "text", pl.Boolean: "boolean"}


def read_csv_checked(
    path: Path,
    display: str,
    spec: dict[str, pl.DataType],
    *,
    skip_lines: int = 0,
    rename: dict[str, str] | None = None,
    optional: dict[str, pl.DataType] | None = None,
) -> pl.DataFrame:
    """Read the ``spec`` columns of a CSV with their types; reject with a position otherwise.

    Parameters
    ----------
    spec : column name -> polars dtype; every one must be present and non-empty on every row.
    skip_lines : lines before the header.
    rename : header name as in file -> name to use (e.g. the empty first header cell).
    optional : columns read when present (empty cells allowed).

    Returns
    -------
    DataFrame with the spec (and present optional) columns plus ``__row`` (0-based data-row
    index); rows that are entirely blank are dropped.

    Raises
    ------
    FormatError
        Missing column (line of the header), a cell that is not of its type, an empty
        required cell, ragged rows, truncated gzip, non-UTF-8 bytes.
    """
    rename = rename or {}
    optional = optional or {}
    head = read_head(path, display)
    header = [rename.get(h, h) for h in header_fields(head, skip_lines)]
    header_line = skip_lines + 1
    for name in spec:
        if name not in header:
            raise FormatError(
                display, header_line, name,
                f"missing column {name!r}; the header has {header}",
            )
    present_opt = {k: v for k, v in optional.items() if k in header}
    wanted = {**spec, **present_opt}
    new_columns = header if rename else None
    try:
        frame = pl.read_csv(
            path,
            skip_lines=skip_lines,
            new_columns=new_columns,
            columns=None if new_columns else list(wanted),
            schema_overrides=None if new_columns else wanted,
            row_index_name=ROW,
            infer_schema=new_columns is None,
        )
        if new_columns:
            frame = frame.select([ROW, *wanted]).with_columns(
                [pl.col(c).cast(t) for c, t in wanted.items()]
            )
    except Exception:  # noqa: BLE001 - any reader failure is re-diagnosed with a position below
        frame = _diagnose(path, display, wanted, header, skip_lines, new_columns)
    frame = _drop_blank(frame, list(wanted))
    for name in spec:
        nulls = frame.filter(pl.col(name).is_null())
        if nulls.height:
            row = int(nulls[ROW][0])
            raise FormatError(display, header_line + 1 + row, name, "empty value")
    for name, dtype in wanted.items():
        if dtype == pl.Float64:
            bad = frame.filter(pl.col(name).is_not_null() & ~pl.col(name).is_finite())
            if bad.height:
                raise FormatError(display, header_line + 1 + int(bad[ROW][0]), name,
                                  f"{bad[name][0]} is not a finite number")
    return frame


def _drop_blank(frame: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    return frame.filter(~pl.all_horizontal([pl.col(c).is_null() for c in cols]))


def _diagnose(path, display, wanted, header, skip_lines, new_columns) -> pl.DataFrame:
    """Slow path: re-read as text, then find the first cell that does not convert."""
    try:
        text = pl.read_csv(
            path,
            skip_lines=skip_lines,
            infer_schema=False,
            new_columns=new_columns,
            row_index_name=ROW,
        ).select([ROW, *wanted])
    except Exception as exc:  # noqa: BLE001
        locate_structure_error(path, display, skip_lines)
        raise FormatError(display, skip_lines + 1, 1, f"unreadable CSV: {exc}") from exc
    out = [pl.col(ROW)]
    for name, dtype in wanted.items():
        col = text[name].str.strip_chars()
        cast = col.cast(dtype, strict=False)
        bad = cast.is_null() & col.is_not_null() & (col != "")
        if bad.any():
            idx = int(bad.arg_true()[0])
            raise FormatError(
                display, skip_lines + 2 + int(text[ROW][idx]), name,
                f"{col[idx]!r} is not a {_KIND.get(dtype, str(dtype))}",
            )
        out.append(pl.lit(cast).alias(name))
    return text.select(out)


def parse_timestamps(
    frame: pl.DataFrame,
    col: str,
    display: str,
    fmt: str | None,
    *,
    header_line: int = 1,
    out: str = "ts",
) -> pl.DataFrame:
    """Parse a text column into a naive UTC ``Datetime('us')`` column ``out``.

    ``fmt`` is a strftime format; one with ``%z`` converts the offset to UTC. ``None`` lets
    polars infer ISO 8601. Raises FormatError at the first value that does not parse.
    """
    series = frame[col]
    if series.dtype != pl.String:
        series = series.cast(pl.String)
    parsed = series.str.strptime(pl.Datetime("us"), fmt, strict=False)
    if parsed.dtype.time_zone is not None:  # type: ignore[union-attr]
        parsed = parsed.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
    bad = parsed.is_null() & series.is_not_null()
    if bad.any():
        idx = int(bad.arg_true()[0])
        raise FormatError(
            display, header_line + 1 + int(frame[ROW][idx]), col,
            f"{series[idx]!r} is not a timestamp" + (f" in format {fmt}" if fmt else ""),
        )
    return frame.with_columns(parsed.alias(out))


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
        raise FormatError(
            display, header_line + 1 + int(frame[ROW][idx]), col_name,
            f"timestamp goes back {-diff_s[idx]:.3f} s from the previous row "
            f"(tolerance {tolerance_s} s); the file is not in time order",
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


def file_stem(display: str) -> str:
    """File name without directories and compression / data suffixes.

    >>> file_stem("dir/AzureLLMInferenceTrace_conv.csv"), file_stem("GB_2023_hourly.csv.gz")
    ('AzureLLMInferenceTrace_conv', 'GB_2023_hourly')
    """
    name = Path(display).name
    for suffix in (".gz", ".csv", ".jsonl", ".json", ".parquet", ".epw", ".prom", ".txt"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    for suffix in (".csv", ".jsonl", ".json", ".epw"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name
