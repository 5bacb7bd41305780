"""Alibaba GenAI (GenTD26) Stable-Diffusion LoRA request trace -> ``requests``.

Source: alibaba/clusterdata ``cluster-trace-v2026-GenAI/lora_request_trace.csv`` (GenTD26,
anonymised). Columns ``gmt_create, predict_type, predict_status, exec_time_seconds, groupId,
prompt_length, negative_prompt_length, num_images_per_prompt, num_inference_steps,
checkpoint_model_version_id, num_lora``.

Mapping: ``ts`` = ``gmt_create``, read as UTC (the name says GMT; the trace does not state a
zone otherwise), or as local time in ``--tz`` when given (rows in file order: the repeated DST
hour's second pass starts where the clock steps back); a value with an offset keeps it;
``gpu_s`` = ``exec_time_seconds`` (execution time of the request: the demand target
for this trace is GPU-seconds per bin); ``model`` = ``checkpoint_model_version_id``;
``failed`` = ``predict_status != 'SUCCEED'`` (FAILED, and PENDING / PROCESSING requests that never
completed). The trace has **no token counts** (``prompt_length`` is a text-prompt length of
unstated unit), so ``prompt_tokens`` / ``completion_tokens`` stay empty.
"""

from __future__ import annotations

import polars as pl

from analytics.ingest.formats._common import (
    Parsed,
    check_monotone,
    check_nonnegative,
    header_fields,
    parse_timestamps,
    read_csv_checked,
    zone_assumption,
)


class AlibabaLoRA:
    """Alibaba GenAI LoRA request trace -> ``requests`` (GPU-seconds, no tokens)."""

    NAME = "alibaba_lora"
    SOURCE_COLUMNS = {"ts": "gmt_create", "model": "checkpoint_model_version_id",
                      "failed": "predict_status (not SUCCEED)", "gpu_s": "exec_time_seconds"}
    TABLE = "requests"
    LOCAL_TIMES = True  # gmt_create has no offset; --tz reads it as local time

    @staticmethod
    def detect(name: str, head: str) -> bool:
        fields = header_fields(head)
        return "gmt_create" in fields and "exec_time_seconds" in fields

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(
            path, display,
            {"gmt_create": pl.String, "predict_status": pl.String, "exec_time_seconds": pl.Float64},
            optional={"checkpoint_model_version_id": pl.String},
        )
        check_nonnegative(frame, ["exec_time_seconds"], display)
        notes: list = []
        frame = parse_timestamps(frame, "gmt_create", display, "%Y-%m-%d %H:%M:%S", tz=opts.tz,
                                 notes=notes)
        back = check_monotone(frame, display, opts.max_backstep_s, "gmt_create")
        model = (pl.col("checkpoint_model_version_id") if "checkpoint_model_version_id"
                 in frame.columns else pl.lit(None, pl.String))
        out = frame.select(
            "ts",
            model.alias("model"),
            pl.lit(None, pl.Int64).alias("prompt_tokens"),
            pl.lit(None, pl.Int64).alias("completion_tokens"),
            (pl.col("predict_status") != "SUCCEED").alias("failed"),
            pl.lit(None, pl.String).alias("session_id"),
            pl.lit(None, pl.Float64).alias("latency_s"),
            pl.col("exec_time_seconds").alias("gpu_s"),
        )
        warnings = [
            "no token counts in this trace: the demand target is GPU-seconds (exec_time_seconds)",
            f"{int(out['failed'].sum())} requests not SUCCEED (FAILED / PENDING / PROCESSING) "
            "flagged failed",
            *notes,
        ]
        if back:
            warnings.append(f"{back} rows step back in time within the tolerance")
        return Parsed("requests", AlibabaLoRA.NAME, out, display, 1.0, tuple(warnings),
                      assumptions=(zone_assumption(opts.tz, "gmt_create"),))
