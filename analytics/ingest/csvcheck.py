"""The CSV / text-file validator of ingest: read checked, reject with file, line and column.

Owns :class:`FormatError` (every rejection of an input file names file, line, column and
reason), the checked readers (:func:`read_head`, :func:`read_csv_checked`, :func:`open_text`) and
the row checks that point at the first offending cell (:func:`check_nonnegative`,
:func:`check_range`, :func:`check_allowed`, :func:`check_monotone`, :func:`check_unique`,
:func:`parse_timestamps`). Used by every format in :mod:`analytics.ingest.formats` and meant for
any other CSV headroom reads (measured serving profiles).

A source is a path (plain or gzip-compressed) or the file's bytes (an upload held in memory).
Line numbers are 1-based and count the header as a line, so the first data row of a plain CSV is
line 2. Column is the column's name as written in the file header (or its field number).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import os
import re
import zlib
from pathlib import Path
from typing import BinaryIO

import polars as pl

from analytics.ingest.encoding import (
    RESAVE,
    decode_head,
    looks_utf16_without_bom,
    source_codec,
    utf8_bytes,
    utf8_path,
    utf16_codec,
)
from analytics.schema import CANONICAL, NAN_AS_EMPTY, NOTE_LINES_KEPT, RULES, TS_ACCEPTED, Note, Rule

#: A file to read: its path, or its bytes.
Source = str | Path | bytes

ROW = "__row"  # 0-based data-row index carried through parsing to report line numbers


#: Longest run of non-space characters an error message echoes from a file (a cell, a header)
ECHO_TOKEN_CHARS = 80
#: Longest error reason (a 100 MB cell must not make a 100 MB message)
ECHO_REASON_CHARS = 1000


def cut_echo(text: str, limit: int = ECHO_TOKEN_CHARS) -> str:
    """``text`` with every run of non-space characters over :data:`ECHO_TOKEN_CHARS` cut to
    its first 40 characters and the whole cut to ``limit`` characters, each cut said
    (``...[+N chars]``). Used on everything a FormatError echoes from a file.

    >>> cut_echo("value " + "x" * 120)
    'value xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...[+80 chars]'
    """
    def cut(match: re.Match) -> str:
        token = match.group(0)
        return f"{token[:40]}...[+{len(token) - 40:,} chars]"

    text = re.sub(rf"\S{{{ECHO_TOKEN_CHARS + 1},}}", cut, str(text))
    if len(text) > limit:
        text = f"{text[:limit]}...[+{len(text) - limit:,} chars]"
    return text


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
        column = cut_echo(column) if isinstance(column, str) else column
        reason = cut_echo(reason, ECHO_REASON_CHARS)
        self.file, self.line, self.column, self.reason = file, line, column, reason
        super().__init__(f"{file}: line {line}, column {column}: {reason}")

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "column": self.column, "reason": self.reason}


class SkippedByDesign(FormatError):
    """A recognised, valid file that holds nothing a canonical table keeps, by design (e.g. an
    ML.ENERGY v3 file whose configurations are all diffusion runs: images / videos, no tokens).

    Ingest reports it with status ``skipped`` and ``reason`` (not ``rejected``) and writes
    nothing (:mod:`analytics.ingest.files`); a caller that knows only :class:`FormatError`
    still refuses it, naming file, line and column. Attributes as :class:`FormatError`, and
    ``format``: the name of the format that recognised the file (set by ``parse_file``).
    """

    format: str | None = None



def _raw(source: Source) -> BinaryIO:
    """The source's bytes as a binary file object (compressed bytes stay compressed)."""
    return io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")  # noqa: SIM115


def _decompressed(source: Source) -> BinaryIO:
    """The source's bytes as a binary file object, gunzipped when gzip-compressed."""
    return gzip.GzipFile(fileobj=_raw(source)) if is_gzip(source) else _raw(source)


def is_gzip(source: Source) -> bool:
    """Whether the source starts with the gzip magic bytes."""
    with _raw(source) as fh:
        return fh.read(2) == b"\x1f\x8b"


def is_parquet(source: Source) -> bool:
    """Whether the source starts with the Parquet magic bytes ``PAR1``."""
    with _raw(source) as fh:
        return fh.read(4) == b"PAR1"


def read_head(path: Source, display: str, nbytes: int = 65536) -> str:
    """First ``nbytes`` of the (decompressed) file as text.

    UTF-16 with a byte-order mark is decoded (TAB-separated rows shown comma-separated, as
    :func:`analytics.ingest.encoding.utf8_path` hands them to the formats).

    Raises
    ------
    FormatError
        Empty file, unreadable gzip, UTF-16 without a byte-order mark ("UTF-16 text: re-save
        as CSV UTF-8"), or bytes that are not UTF-8 text (binary garbage).
        Parquet files return ``"PAR1"``.
    """
    size = len(path) if isinstance(path, bytes) else Path(path).stat().st_size
    if size == 0:
        raise FormatError(display, 1, 1, "empty file")
    if is_parquet(path):
        return "PAR1"
    try:
        with _decompressed(path) as fh:
            raw = fh.read(nbytes)
    except (OSError, EOFError, zlib.error) as exc:
        raise FormatError(display, 1, 1, f"gzip stream is unreadable: {exc}") from exc
    if not raw.strip():
        raise FormatError(display, 1, 1, "empty file (no data after decompression)")
    codec = utf16_codec(raw)
    if codec is not None:
        return decode_head(raw, codec)
    if b"\x00" in raw:
        if looks_utf16_without_bom(raw):
            raise FormatError(display, 1, 1, f"{RESAVE} (UTF-16 without a byte-order mark)")
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


def max_decompressed_bytes() -> int:
    """Most bytes a compressed file may expand to: ``$HEADROOM_MAX_DECOMPRESSED_MB`` (default
    2,000 MB)."""
    return int(float(os.environ.get("HEADROOM_MAX_DECOMPRESSED_MB", 2000)) * 1_000_000)


#: Largest expansion ratio accepted once a file expands past 64 MB (real CSV and JSON traces
#: compress 5-30x; a decompression bomb, 1,000x)
MAX_EXPANSION_RATIO = 200


def check_decompressed_size(path: Source, display: str) -> None:
    """Stream a gzip file to its end in 1 MiB chunks (memory stays flat), refusing it as soon as
    it expands past :func:`max_decompressed_bytes` or, beyond 64 MB, past
    :data:`MAX_EXPANSION_RATIO` times its compressed size. A plain file passes untouched.

    Raises
    ------
    FormatError
        Line 1, naming the limit, the size reached and what to do.
    """
    if isinstance(path, bytes) or not is_gzip(path):
        return
    packed = Path(path).stat().st_size
    cap, done = max_decompressed_bytes(), 0
    try:
        with gzip.GzipFile(fileobj=_raw(path)) as fh:
            while chunk := fh.read(1 << 20):
                done += len(chunk)
                if done > cap or (done > 64_000_000 and done > MAX_EXPANSION_RATIO * packed):
                    why = (f"over the {cap / 1e6:,.0f} MB limit" if done > cap else
                           f"over {MAX_EXPANSION_RATIO}x its compressed {packed / 1e6:,.1f} MB")
                    raise FormatError(display, 1, 1, (
                        f"the compressed file expands to more than {done / 1e6:,.0f} MB, {why} "
                        "(a decompression bomb?); decompress it yourself and ingest the plain "
                        "file, or raise HEADROOM_MAX_DECOMPRESSED_MB"))
    except (OSError, EOFError, zlib.error):
        return  # truncated or corrupt: the parsers name the line where it breaks off


def check_gzip_stream(path: Source, display: str) -> None:
    """Read a gzip file to its end; raise FormatError at the line where it breaks off."""
    lines = 0
    try:
        with gzip.GzipFile(fileobj=_raw(path)) as fh:
            while chunk := fh.read(1 << 16):
                lines += chunk.count(b"\n")
    except (OSError, EOFError, zlib.error) as exc:
        raise FormatError(
            display, lines + 1, 1,
            f"gzip stream is truncated or corrupt after {lines} complete lines ({exc})",
        ) from exc


def open_text(path: Source) -> io.TextIOWrapper:
    """The source as text (gunzipped if needed), newlines untranslated (``newline=""``), for
    the csv module and line-by-line parsers: UTF-8 (a leading byte-order mark is kept as
    U+FEFF), or UTF-16 when it starts with a UTF-16 byte-order mark (the mark skipped)."""
    with _decompressed(path) as fh:
        codec = utf16_codec(fh.read(2))
    raw = _decompressed(path)
    if codec is not None:
        raw.read(2)
    return io.TextIOWrapper(raw, encoding=codec or "utf-8", newline="")


def locate_structure_error(path: Source, display: str, skip_lines: int = 0) -> None:
    """Walk the CSV with the csv module and raise at the first ragged row or bad byte.

    Called only after a fast reader has failed, to turn its message into a position.
    """
    if is_gzip(path):
        check_gzip_stream(path, display)
    line = 0
    limit = csv.field_size_limit(WIDE_FIELD)  # a huge cell is named by the reader, not here
    try:
        with open_text(path) as fh:
            for _ in range(skip_lines):
                fh.readline()
                line += 1
            reader = csv.reader(fh)
            width, ended = None, 0
            for row in reader:
                start, ended = skip_lines + ended + 1, reader.line_num
                line = skip_lines + reader.line_num
                if not row:
                    continue
                if width is None:
                    width = len(row)
                elif any("\n" in cell or "\r" in cell for cell in row) and len(row) != width:
                    raise FormatError(  # a quote opened here ran on over the following lines
                        display, start, _quoted_field(row) + 1,
                        f"a quote opens on this line and is not closed where the row should "
                        f"end (the quoted field runs on to line {line})")
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
    finally:
        csv.field_size_limit(limit)


#: Field size the csv module accepts while a file is walked (its default, 128 KiB, would make
#: a huge cell a "malformed CSV" at column 1 instead of a bad value in its named column)
WIDE_FIELD = 1 << 30


@contextlib.contextmanager
def wide_csv_fields():
    """Within the block the csv module reads fields up to :data:`WIDE_FIELD` characters."""
    limit = csv.field_size_limit(WIDE_FIELD)
    try:
        yield
    finally:
        csv.field_size_limit(limit)


def _quoted_field(row: list[str]) -> int:
    """0-based index of the first field of ``row`` that spans lines."""
    return next((i for i, cell in enumerate(row) if "\n" in cell or "\r" in cell), 0)


def _locate_bad_utf8(path: Source) -> tuple[int, int]:
    """Line and field number (1-based; fields counted by commas) of the first byte that is not
    valid UTF-8."""
    with _decompressed(path) as fh:
        data = fh.read()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        return line, data.count(b",", line_start, exc.start) + 1
    return 1, 1


_KIND = {pl.Int64: "an integer", pl.Float64: "a number", pl.String: "text",
         pl.Boolean: "a boolean"}


def read_csv_checked(
    path: Source,
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
    path : the file's path, or its bytes.
    display : the file's name in messages.
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
        required cell, ragged rows, truncated gzip, non-UTF-8 bytes. UTF-16 with a
        byte-order mark is decoded first (:mod:`analytics.ingest.encoding`).
    """
    if source_codec(path) is not None:  # UTF-16 (Excel "Unicode text"): read as UTF-8
        if isinstance(path, bytes):
            path = utf8_bytes(path, display)
        else:
            with utf8_path(path, display) as (text_path, _):
                return read_csv_checked(text_path, display, spec, skip_lines=skip_lines,
                                        rename=rename, optional=optional)
    rename = rename or {}
    optional = optional or {}
    head = read_head(path, display)
    header = [rename.get(h, h) for h in header_fields(head, skip_lines)]
    header_line = skip_lines + 1
    check_header_unique(header, display, header_line, names=[*spec, *optional])
    for name in spec:
        if name not in header:
            raise FormatError(
                display, header_line, name,
                f"missing column {name!r}; the header has {header}",
            )
    if _walk_affordable(path):  # polars pads a short row with empty cells: refuse it instead
        locate_structure_error(path, display, skip_lines)
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
    if frame.height == 0:
        raise FormatError(display, header_line + 1, 1, "no data rows (header only)")
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


#: Largest file (bytes on disk; a quarter of it when gzip-compressed) whose rows are all walked
#: with the csv module before the fast read, so that a short or long row (a truncated last line,
#: a missing or extra field) is refused naming its line instead of padded with empty cells.
#: About 20 MB/s; a larger file is checked by the fast reader only (extra fields, empty required
#: cells), to keep ingest of multi-GB traces linear in polars' speed.
STRUCTURE_WALK_MAX_BYTES = 64 * 1024 * 1024


def _walk_affordable(source: Source) -> bool:
    """Whether :func:`locate_structure_error` runs on every row of ``source`` (see
    :data:`STRUCTURE_WALK_MAX_BYTES`)."""
    size = len(source) if isinstance(source, bytes) else Path(source).stat().st_size
    return size * (4 if is_gzip(source) else 1) <= STRUCTURE_WALK_MAX_BYTES


def check_header_unique(header: list[str], display: str, line: int = 1,
                        names: list[str] | None = None) -> None:
    """Refuse a header in which a column name (of ``names``, default every non-empty one)
    appears more than once: which column holds the data would be a guess (issue 16 item 7).

    Raises
    ------
    FormatError
        At (``line``, the name), naming every field number it appears at.
    """
    for name in dict.fromkeys(names if names is not None else [h for h in header if h]):
        where = [i + 1 for i, h in enumerate(header) if h == name]
        if len(where) > 1:
            raise FormatError(display, line, name, (
                f"column name {name!r} appears {len(where)} times (fields "
                f"{', '.join(map(str, where))}): which one holds the data is ambiguous"))


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
                f"{col[idx]!r} is not {_KIND.get(dtype, f'a {dtype}')}",
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
    tz: str | None = None,
    notes: list | None = None,
    by: list[str] | None = None,
    unique: bool = False,
) -> pl.DataFrame:
    """Parse a text column into a naive UTC ``Datetime('us')`` column ``out``.

    ``fmt`` is the strftime format the source writes (one with ``%z`` converts the offset to
    UTC; ``None`` lets polars infer ISO 8601). It is tried first on every row (fast, vectorised);
    only the rows it misses are tried as ISO 8601 with or without an offset: ``T`` or space
    between date and time, 0-9 fraction digits, ``Z`` / ``+hh:mm`` / ``+hhmm``
    (``2024-05-10 00:00:00.123456+00:00``, ``2024-05-10T02:00:01Z``,
    ``2023-11-16 18:17:03.9799600``). A value with an offset is converted to UTC with it.

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
        fmt += "%z"  # the source writes offsets (Azure 2024 '+00:00'): read them on the fast path
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


_ISO_DATE_T = r"^(\d{4}-\d{2}-\d{2})[Tt ]"
_ISO_OFFSET = r"[+-]\d{2}:?\d{2}$"


def _iso_fallback(series: pl.Series, parsed: pl.Series, naive: pl.Series,
                  missed: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Parse the ``missed`` rows of ``series`` as ISO 8601 (see :func:`parse_timestamps`) into
    ``parsed`` (naive UTC); ``naive`` marks the rows that had no offset."""
    idx = missed.arg_true()
    norm = (series.filter(missed).str.strip_chars().str.replace(_ISO_DATE_T, "$1 ")
            .str.replace(r"[Zz]$", "+00:00"))
    has_offset = norm.str.contains(_ISO_OFFSET)

    def read(formats: tuple[str, ...]) -> pl.Series:
        got = [norm.str.strptime(pl.Datetime("us"), f, strict=False) for f in formats]
        got = [g.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
               if g.dtype.time_zone is not None else g for g in got]  # type: ignore[union-attr]
        return pl.select(pl.coalesce(got)).to_series()

    with_offset = read(("%Y-%m-%d %H:%M:%S%.f%z", "%Y-%m-%d %H:%M%z"))
    without = read(("%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M"))
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
