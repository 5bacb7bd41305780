"""Azure LLM inference traces (2023 Splitwise; 2024 DynamoLLM week-long traces).

Source: Azure/AzurePublicDataset, ``AzureLLMInferenceTrace_{code,conv}[_1week].csv``, CC BY 4.0.
Columns ``TIMESTAMP, ContextTokens, GeneratedTokens``. ``TIMESTAMP`` is UTC: the 2023 release
writes ``YYYY-MM-DD HH:MM:SS.fffffff`` (7 fractional digits, read to the microsecond, no offset);
the 2024 week-long release writes ``+00:00`` and six fraction digits or none
(``2024-05-10 00:00:00.123456+00:00``, ``2024-05-10 00:00:01+00:00``). Any ISO 8601 form with or
without an offset is accepted (:func:`~analytics.ingest.csvcheck.parse_timestamps`); values with
an offset are converted to UTC with it, values without one are read as UTC (``--tz`` does not
apply: the traces are not in a local clock).
The traces carry no model name, failure flag, session or latency: those columns stay empty. An
empty ``GeneratedTokens`` cell (an edited export) is left empty (NULL, not 0) with a note naming
the line.
"""

from __future__ import annotations

import polars as pl

from analytics.ingest.formats._common import (
    FormatError,
    Parsed,
    check_monotone,
    check_nonnegative,
    header_fields,
    note_rows,
    parse_timestamps,
    read_csv_checked,
)


class AzureLLM:
    """Azure LLM inference trace 2023 / 2024 -> ``requests``."""

    NAME = "azure_llm"
    TABLE = "requests"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        fields = header_fields(head)
        return bool(fields) and fields[0] == "TIMESTAMP" and (
            "ContextTokens" in fields or "GeneratedTokens" in fields)

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(
            path, display,
            {"TIMESTAMP": pl.String, "ContextTokens": pl.Int64},
            optional={"GeneratedTokens": pl.Int64},
        )
        if "GeneratedTokens" not in frame.columns:
            raise FormatError(display, 1, "GeneratedTokens", "missing column 'GeneratedTokens'")
        check_nonnegative(frame, ["ContextTokens", "GeneratedTokens"], display)
        frame = parse_timestamps(frame, "TIMESTAMP", display, "%Y-%m-%d %H:%M:%S%.f")
        back = check_monotone(frame, display, opts.max_backstep_s, "TIMESTAMP")
        out = frame.select(
            "ts",
            pl.lit(None, pl.String).alias("model"),
            pl.col("ContextTokens").alias("prompt_tokens"),
            pl.col("GeneratedTokens").alias("completion_tokens"),
            pl.lit(False).alias("failed"),
            pl.lit(None, pl.String).alias("session_id"),
            pl.lit(None, pl.Float64).alias("latency_s"),
        )
        warnings = ["Azure traces have no model, failure, session or latency fields"]
        empty = note_rows(frame, frame["GeneratedTokens"].is_null(),
                          "empty GeneratedTokens: completion tokens left empty (NULL, not 0)",
                          "GeneratedTokens")
        if empty is not None:
            warnings.append(empty)
        if back:
            warnings.append(f"{back} rows step back in time within the tolerance")
        return Parsed("requests", AzureLLM.NAME, out, display, 1e-6, tuple(warnings))
