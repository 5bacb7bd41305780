"""Alibaba openb pod list -> ``jobs``.

Source: alibaba/clusterdata ``cluster-trace-gpu-v2023`` (the "openb" traces of Weng et al., "Beware
of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX
ATC'23), files ``openb_pod_list_<variant>.csv`` with columns ``name, cpu_milli, memory_mib,
num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time``.
``openb_pod_list_default.csv`` holds 8,152 pods (1,088 without GPUs, 897 never scheduled).

Mapping (times per the upstream README: "Timestamp of ... (in seconds)"; the first pod is created
at 0, so they are seconds from the start of the trace and are anchored at ``ParseOptions.t0``,
like BurstGPT and Mooncake; weekdays and dates are then relative, durations are real):

* ``job_id`` = ``name``; ``submit_ts`` = t0 + ``creation_time``; ``start_ts`` = t0 +
  ``scheduled_time`` (empty for pods never scheduled, phase ``Pending``); ``end_ts`` = t0 +
  ``deletion_time`` for scheduled pods, empty otherwise. Pods still running when the trace was cut
  carry the cut instant as deletion time (right-censored runtimes).
* ``n_gpus`` = ``num_gpu``: whole GPUs the pod is bound to (0-8).
* ``gpu_milli`` = ``num_gpu * gpu_milli``: the total GPU share requested, in thousandths of a
  GPU. ``gpu_milli`` in the file is per GPU and below 1000 only for GPU-sharing pods
  (``num_gpu == 1``), so a pod holding 46 % of one GPU has ``n_gpus`` 1 and ``gpu_milli`` 460, and
  an 8-GPU pod has 8000. Formats without shares (Slurm) leave the column empty, which readers
  take as ``n_gpus * 1000`` (see :func:`analytics.store.gpu_jobs`).
* ``gpu_kind`` = ``gpu_spec`` (GPU-type constraint of the ``gpuspec`` variants, e.g.
  ``V100M16|V100M32``), empty when unconstrained.
* ``state`` = ``pod_phase`` upper-cased (``RUNNING``, ``SUCCEEDED``, ``FAILED``, ``PENDING``);
  ``exit_code`` and ``user_hash`` are not in the trace. CPU, memory and QoS are not kept.

The ``multigpu50`` variant has no times and is rejected with the missing column named.
"""

from __future__ import annotations

from datetime import UTC

import polars as pl

from analytics.ingest.formats._common import (
    FormatError,
    Parsed,
    header_fields,
    raise_at_first,
    read_csv_checked,
)


class OpenB:
    """Alibaba openb pod list -> ``jobs`` (GPU-sharing pods, ``gpu_milli``)."""

    NAME = "alibaba_openb"
    SOURCE_COLUMNS = {"job_id": "name", "submit_ts": "creation_time",
                      "start_ts": "scheduled_time", "end_ts": "deletion_time",
                      "n_gpus": "num_gpu", "gpu_kind": "gpu_spec", "state": "pod_phase",
                      "gpu_milli": "num_gpu x gpu_milli"}
    ASSUMES_T0 = "openb pod times are seconds from the trace start (no dates)"
    TABLE = "jobs"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        return {"name", "cpu_milli", "num_gpu", "gpu_milli"} <= set(header_fields(head))

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(
            path, display,
            {"name": pl.String, "num_gpu": pl.Int64, "gpu_milli": pl.Int64,
             "creation_time": pl.Float64, "deletion_time": pl.Float64, "pod_phase": pl.String},
            optional={"scheduled_time": pl.Float64, "gpu_spec": pl.String},
        )
        if "scheduled_time" not in frame.columns:
            raise FormatError(display, 1, "scheduled_time",
                              "missing column 'scheduled_time' (start times are needed for jobs)")
        raise_at_first(frame, (frame["num_gpu"] < 0) | (frame["num_gpu"] > 64), display, "num_gpu",
                   "{value} is not a GPU count (0-64)")
        raise_at_first(frame, (frame["gpu_milli"] < 0) | (frame["gpu_milli"] > 1000), display,
                   "gpu_milli", "{value} is not a per-GPU share in milli-GPUs (0-1000)")
        raise_at_first(frame, (frame["num_gpu"] > 0) & (frame["gpu_milli"] == 0), display, "gpu_milli",
                   "0 milli-GPUs for a pod that requests GPUs")
        for col in ("creation_time", "deletion_time", "scheduled_time"):
            raise_at_first(frame, frame[col].fill_null(0) < 0, display, col,
                       "{value} is negative (seconds from the trace start expected)")
        raise_at_first(frame, frame["deletion_time"] < frame["creation_time"], display, "deletion_time",
                   "{value} is before the pod's creation_time")
        raise_at_first(frame, frame["scheduled_time"].fill_null(float("inf")) < frame["creation_time"],
                   display, "scheduled_time", "{value} is before the pod's creation_time")
        raise_at_first(frame, frame["deletion_time"] < frame["scheduled_time"].fill_null(-1.0), display,
                   "deletion_time", "{value} is before the pod's scheduled_time")

        t0_us = int(opts.t0.astimezone(UTC).timestamp() * 1e6)

        def at(col: str) -> pl.Expr:
            return pl.from_epoch((pl.col(col) * 1e6).round().cast(pl.Int64) + t0_us, "us")

        scheduled = pl.col("scheduled_time").is_not_null()
        kind = pl.col("gpu_spec") if "gpu_spec" in frame.columns else pl.lit(None, pl.String)
        out = frame.select(
            pl.col("name").alias("job_id"),
            at("creation_time").alias("submit_ts"),
            at("scheduled_time").alias("start_ts"),
            pl.when(scheduled).then(at("deletion_time")).alias("end_ts"),
            pl.col("num_gpu").cast(pl.Int32).alias("n_gpus"),
            kind.alias("gpu_kind"),
            pl.col("pod_phase").str.to_uppercase().alias("state"),
            pl.lit(None, pl.Int32).alias("exit_code"),
            pl.lit(None, pl.String).alias("user_hash"),
            (pl.col("num_gpu") * pl.col("gpu_milli")).cast(pl.Int32).alias("gpu_milli"),
        )
        n_gpu = int((out["n_gpus"] > 0).sum())
        sharing = int(((out["n_gpus"] == 1) & (out["gpu_milli"] < 1000)).sum())
        pending = int(out["start_ts"].is_null().sum())
        cut = frame["deletion_time"].max()
        censored = int(((frame["deletion_time"] == cut) & frame["scheduled_time"].is_not_null()).sum())
        return Parsed("jobs", OpenB.NAME, out, display, 1.0, (
            f"{n_gpu} of {out.height} pods request GPUs; {sharing} of them share one GPU "
            "(gpu_milli < 1000)",
            f"{pending} pods were never scheduled (no start or end)",
            f"{censored} pods were still running at the trace cut (deletion_time = {cut:.0f} s): "
            "their runtimes are censored",
        ))
