"""Input formats: detect a file's family and parse it into a canonical table.

A format is one class (the plug-in form, see :class:`~analytics.ingest.formats._common.Format`):
``NAME``, ``TABLE`` (the canonical table it fills), ``detect(name, head) -> bool`` and
``parse(path, display, opts) -> Parsed``, both static methods; a module may hold several related
formats. :data:`FORMATS` lists every format once, in detection order. ``parse_file`` picks the
format, brings its rows to the table's canonical schema (:func:`analytics.schema.conform`), and
every rejection is a :class:`FormatError` naming file, line and column. To add a format: write the
class (in a new module or beside its family) and add it to :data:`FORMATS`. A format whose file
writes local wall-clock times without an offset sets ``LOCAL_TIMES = True`` and converts them
with ``opts.tz`` (:mod:`analytics.ingest.localtime`): ``slurm_sacct``, ``nvidia_smi``,
``alibaba_lora`` and ``canonical`` do.

Formats, in detection order (first match wins):

=================  ==================  =====================================================
name               table               file family
=================  ==================  =====================================================
burstgpt           requests            BurstGPT v1 / v3 request logs
burstgpt_minute    demand_series       BurstGPT per-minute aggregate ``t,tps,norm``
burstgpt_daily     demand_series       BurstGPT daily aggregate ``d,req,tok``
azure_llm          requests            Azure LLM inference 2023 / 2024 ``TIMESTAMP,...``
mooncake           requests            Mooncake JSONL ``timestamp,input_length,...``
alibaba_lora       requests            Alibaba GenAI LoRA trace (GPU-seconds, no tokens)
mit_supercloud_slurm jobs              MIT SuperCloud Slurm accounting export
slurm_sacct        jobs                ``sacct --parsable2`` output
alibaba_openb      jobs                Alibaba openb pod list (GPU-sharing pods, gpu_milli)
sustaindc_carbon   carbon_intensity    SustainDC / EIA ``<BA>_NG_&_avgCI.csv``
greendcc_carbon    carbon_intensity    Green-DCC / Electricity Maps hourly carbon
greendcc_prices    prices              Green-DCC hourly electricity prices
epw_weather        weather             EnergyPlus ``.epw`` typical-year weather
openmeteo_weather  weather             Green-DCC Open-Meteo ``.json.gz`` weather
nvidia_smi         telemetry           ``nvidia-smi --query-gpu=... --format=csv`` (noheader too)
dcgm_prometheus    telemetry           DCGM exporter Prometheus text exposition
acmetrace_cdf      reference_cdf       AcmeTrace power / utilisation CDFs (overlays)
mlenergy_v2        bench_runs          ML.ENERGY leaderboard v2 flattened LLM runs CSV
mlenergy_v3        bench_runs          ML.ENERGY leaderboard v3 ``tasks/*.json`` / flat CSV
argonne_bench      bench_runs          Argonne LLM-Inference-Bench result CSVs
sglang_bench       bench_runs          SGLang ``bench_serving --output-file`` JSON Lines
vllm_bench         bench_runs          ``vllm bench serve --save-result`` JSON (or JSON Lines)
canonical          any                 CSV / Parquet already in a canonical schema
=================  ==================  =====================================================
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from analytics.config import ParseOptions
from analytics.ingest import fastcsv
from analytics.ingest.csvcheck import (
    check_decompressed_size,
    check_rules,
    row_lines,
    ts_range_text,
)
from analytics.ingest.encoding import source_codec, utf8_path
from analytics.ingest.formats import (
    alibaba,
    azure,
    bench,
    burstgpt,
    canonical,
    carbon,
    dcgm,
    jobs,
    mlenergy_v3,
    mooncake,
    openb,
    prices,
    sglang,
    telemetry,
    vllm,
    weather,
)
from analytics.ingest.formats._common import (
    Format,
    FormatError,
    Parsed,
    SkippedByDesign,
    header_fields,
    read_head,
    t0_assumption,
)
from analytics.ingest.leading_index import is_index_column, without_index_column
from analytics.ingest.rawfile import (
    JSON_WEIGHT,
    check_in_memory,
    check_parquet_size,
    is_gzip,
    is_parquet,
)
from analytics.schema import conform, ts_out_of_range

__all__ = ["FORMATS", "Format", "FormatError", "Parsed", "SkippedByDesign", "detect", "parse_file",
           "format_names"]

#: Every format by name, in detection order (first match wins).
FORMATS: dict[str, type[Format]] = {
    fmt.NAME: fmt
    for fmt in (
        burstgpt.Requests,
        burstgpt.Minute,
        burstgpt.Daily,
        azure.AzureLLM,
        mooncake.Mooncake,
        alibaba.AlibabaLoRA,
        jobs.MITSupercloud,
        jobs.Sacct,
        openb.OpenB,
        carbon.SustainDC,
        carbon.GreenDCC,
        prices.GreenDCCPrices,
        weather.EPW,
        weather.OpenMeteo,
        telemetry.NvidiaSmi,
        dcgm.Dcgm,
        telemetry.AcmeCdf,
        bench.MLEnergyV2,
        mlenergy_v3.MLEnergyV3,
        bench.Argonne,
        sglang.SGLangBench,
        vllm.VllmBench,
        canonical.Canonical,
    )
}


_TOO_DEEP = ("nested deeper than the JSON reader allows (about 1,000 levels); "
             "no trace format nests like this")


def format_names() -> list[str]:
    """Names accepted by ``--format``."""
    return list(FORMATS)


def detect(path: str | Path, display: str | None = None) -> type[Format]:
    """Return the format class that recognises the file.

    Raises
    ------
    FormatError
        Empty file, binary data that is not Parquet, or no format recognises the header.
    """
    path = Path(path)
    display = display or path.name
    return _detect_head(display, read_head(path, display))


def _detect_head(display: str, head: str) -> type[Format]:
    """The first format of :data:`FORMATS` whose ``detect`` accepts ``head``."""
    for fmt in FORMATS.values():
        try:
            if fmt.detect(display, head):
                return fmt
        except RecursionError as exc:  # e.g. JSON nested 10,000 deep: refuse, never a traceback
            raise FormatError(display, 1, 1, _TOO_DEEP) from exc
        except Exception:  # noqa: BLE001 - a detector that fails does not recognise the file
            continue
    first = head.splitlines()[0][:200] if head else ""
    raise FormatError(
        display, 1, 1,
        f"no known format recognises this file (first line: {first!r}); "
        f"known formats: {', '.join(FORMATS)}",
    )


def parse_file(
    path: str | Path,
    display: str | None = None,
    fmt: str | None = None,
    opts: ParseOptions | None = None,
    *,
    stream: bool = False,
) -> Parsed:
    """Parse one file into canonical rows.

    Parameters
    ----------
    path : path of the file on disk (plain or gzip-compressed; UTF-8, or UTF-16 with a
        byte-order mark, decoded once by :func:`analytics.ingest.encoding.utf8_path`).
    display : name used in messages and as the default dataset name (default: the file name).
    fmt : force a format by name instead of detecting it.
    opts : parse options (start instant for relative timestamps, site, year, time zone of local
        times: applied by the formats whose ``LOCAL_TIMES`` is true and recorded as
        ``Parsed.source_tz``; other formats add a warning that it was not applied).
    stream : let a file of a format with a SQL plan (BurstGPT, Azure LLM: the one road) be read
        later, by DuckDB in the store's ingest transaction (``Parsed.stream``, see
        :mod:`analytics.ingest.fastcsv`; its ``frame`` is then empty): what the ingest does
        (:func:`analytics.ingest.files.parse_all`). False (the default here) reads every row
        now with the checked reader.

    Raises
    ------
    FormatError
        With file, line and column, for anything that is not a valid file of the format.
    SkippedByDesign
        (a FormatError) A valid file that holds nothing for any table by design (ML.ENERGY
        diffusion runs); ``format`` names the format that recognised it.
    """
    path = Path(path)
    display = display or path.name
    opts = opts or ParseOptions()
    if fmt is not None and fmt not in FORMATS:
        raise FormatError(display, 1, 1, f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    read_head(path, display)  # empty / binary checks apply to a forced format too
    expanded = check_decompressed_size(path, display)  # before any reader holds it in memory
    if stream and (fast := _streamed(path, display, fmt, opts, expanded)) is not None:
        return fast
    if is_parquet(path):  # the readers below hold a file whole: bounded first
        check_parquet_size(path, display)
    else:
        json = read_head(path, display).lstrip()[:1] in ("{", "[")
        check_in_memory(expanded.bytes, display, "expands to" if is_gzip(path) else "is",
                        JSON_WEIGHT if json else 1)
    with utf8_path(path, display) as (text_path, decoded):  # UTF-16 exports: read as UTF-8
        parsed = _parse_text(text_path, display, fmt, opts)
    if decoded:
        parsed = dataclasses.replace(parsed, warnings=(decoded, *parsed.warnings))
    return parsed


def _streamed(path: Path, display: str, fmt: str | None, opts: ParseOptions,
              expanded) -> Parsed | None:
    """The streamed Parsed of a file of a fast-path format, else None. UTF-16 text is decoded
    and a pandas index column dropped first, each as a stream into a temporary UTF-8 copy (one
    output line per input line, so every line number holds), which the stream reads and which
    is deleted with it; the notes say so, first, as the checked reader's do."""
    import weakref

    head = read_head(path, display)
    try:
        plugin = _detect_head(display, head) if fmt is None else FORMATS[fmt]
    except FormatError:
        return None
    if not hasattr(plugin, "stream_plan"):
        return None
    zone = _zone_note(plugin, opts.tz)
    stack = contextlib.ExitStack()
    text_path, lead = path, []
    try:
        if source_codec(path) is not None:
            text_path, decoded = stack.enter_context(utf8_path(path, display))
            lead.append(decoded)
            head = read_head(text_path, display)
        if is_index_column(head):
            text_path = stack.enter_context(without_index_column(text_path))
            lead.append(_INDEX_DROPPED)
            head = read_head(text_path, display)
        got = fastcsv.streamed_parsed(plugin, text_path, display, head, opts,
                                      lambda: parse_file(path, display, fmt, opts, stream=False),
                                      expanded if text_path == path else None,
                                      tail=(zone,) if zone else (), lead=tuple(lead))
    except BaseException:
        stack.close()
        raise
    if got is None:
        stack.close()
        return None
    weakref.finalize(got.stream, stack.close)  # the copy lives as long as its stream
    return with_sources(got, plugin, header_fields(head), opts)


_INDEX_DROPPED = "an unnamed leading index column (pandas to_csv) was dropped"


def _parse_text(path: Path, display: str, fmt: str | None, opts: ParseOptions) -> Parsed:
    """:func:`parse_file` on a file that is UTF-8 text (or binary Parquet). A CSV whose only
    difference from a known format is a pandas index column is read without that column."""
    head = read_head(path, display)
    if head != "PAR1" and is_index_column(head):
        with without_index_column(path) as stripped:
            parsed = _parse_text(stripped, display, fmt, opts)
        return dataclasses.replace(parsed, warnings=(_INDEX_DROPPED, *parsed.warnings))
    plugin = _detect_head(display, head) if fmt is None else FORMATS[fmt]
    try:
        parsed = plugin.parse(path, display, opts)
        _check_times(parsed.frame, display, getattr(plugin, "TIME_COLUMN", None),
                     getattr(plugin, "SOURCE_COLUMNS", None) or {})
        frame, notes = check_rules(parsed.frame, parsed.table, display,
                                   getattr(plugin, "SOURCE_COLUMNS", None))
        parsed = dataclasses.replace(parsed, frame=frame, warnings=(*parsed.warnings, *notes),
                                     lines=row_lines(frame) if parsed.lines is None
                                     else parsed.lines)
        parsed = dataclasses.replace(parsed, frame=conform(parsed.frame, parsed.table))
    except SkippedByDesign as exc:
        exc.format = exc.format or plugin.NAME
        raise
    except FormatError:
        raise
    except RecursionError as exc:
        raise FormatError(display, 1, 1, _TOO_DEEP) from exc
    except Exception as exc:  # a value no check above anticipated: never a traceback
        raise FormatError(display, 1, 1, f"could not read the file as {plugin.NAME}: "
                                         f"{type(exc).__name__}: {exc}") from exc
    if parsed.frame.height == 0:
        raise FormatError(display, 2, 1, "no data rows (header only)")
    return _with_zone(with_sources(parsed, plugin, opts=opts), plugin, opts.tz)


def with_sources(parsed: Parsed, plugin: type[Format], header: list[str] | None = None,
                 opts: ParseOptions | None = None) -> Parsed:
    """``parsed`` with :attr:`Parsed.sources` filled from the format's ``SOURCE_COLUMNS``
    (canonical field -> the column as the file names it) when the reader did not set them for
    this file: a field is listed when the stored frame has a value in it, or (a streamed file,
    whose rows are read later) when its column is in ``header``. A format whose times count
    from the trace start (``ASSUMES_T0``: what counts) gets the start time it was placed at
    as an assumption (:func:`~analytics.ingest.formats._common.t0_assumption`)."""
    if (what := getattr(plugin, "ASSUMES_T0", None)) and opts is not None:
        parsed = dataclasses.replace(parsed, assumptions=(t0_assumption(opts, what),
                                                          *parsed.assumptions))
    if parsed.sources:
        return parsed
    static = getattr(plugin, "SOURCE_COLUMNS", None) or {}
    if header is not None:
        got = {f: c for f, c in static.items()
               if c.split(" [")[0].split(" (")[0] in header}
    else:
        frame = parsed.frame
        got = {f: c for f, c in static.items()
               if f in frame.columns and frame[f].null_count() < frame.height}
    return dataclasses.replace(parsed, sources=got)


def _check_times(frame, display: str, time_column: str | None,
                 source_columns: dict[str, str]) -> None:
    """Refuse a time outside :data:`analytics.schema.TS_ACCEPTED` that the format did not check
    itself (times computed from t0 + offset, epochs). A format that keeps the file line of each
    row (``__line``, or ``__row`` of a one-line-header file: :func:`csvcheck.row_lines`;
    :func:`~analytics.schema.conform` drops both) gets the line named, and the column as the
    file names it (``TIME_COLUMN``, else ``SOURCE_COLUMNS``); otherwise the data row is."""
    outside = ts_out_of_range(frame)
    if outside:
        col, row, value = outside
        lines = row_lines(frame)
        if lines is not None:
            raise FormatError(display, int(lines[row]),
                              time_column or source_columns.get(col, col),
                              f"time {value} is outside the accepted range {ts_range_text()}")
        raise FormatError(display, 1, col, f"time {value} (data row {row + 1}) is outside the "
                                           f"accepted range {ts_range_text()}")


def _with_zone(parsed: Parsed, plugin: type[Format], tz: str | None) -> Parsed:
    """Record the zone a format applied (``LOCAL_TIMES`` formats), or say it was not applied."""
    if tz is None:
        return parsed
    if getattr(plugin, "LOCAL_TIMES", False):
        return dataclasses.replace(parsed, source_tz=tz)
    return dataclasses.replace(parsed, warnings=(*parsed.warnings, _zone_note(plugin, tz)))


def _zone_note(plugin: type[Format], tz: str | None) -> str | None:
    """The warning that ``--tz`` was not applied to a format without local times (None when no
    zone was given or the format applies it)."""
    if tz is None or getattr(plugin, "LOCAL_TIMES", False):
        return None
    return (f"time zone {tz} not applied: {plugin.NAME} times are UTC, carry their own offset, "
            "or count from t0 (see the format's notes)")
