"""Alibaba openb pod list -> jobs, fractional GPUs (gpu_milli, migration 6)."""

from __future__ import annotations

from datetime import datetime

import pytest
from conftest import shared
from harness import store_at_version

from analytics import store
from analytics.config import ParseOptions
from analytics.ingest import files as ingest
from analytics.ingest.formats import FormatError, parse_file

OPENB = "alibaba_gpu_traces/v2023_openb/openb_pod_list_{}.csv"


def test_openb_default_pod_list_counts():
    p = parse_file(shared(OPENB.format("default")))
    f = p.frame
    assert (p.format, p.table, f.height) == ("alibaba_openb", "jobs", 8152)
    assert int((f["n_gpus"] > 0).sum()) == 7064
    assert int(((f["n_gpus"] == 1) & (f["gpu_milli"] < 1000)).sum()) == 3078  # GPU-sharing
    assert f["start_ts"].null_count() == 897 and f["end_ts"].null_count() == 897
    states = dict(zip(*f["state"].value_counts().sort("state").to_dict(as_series=False).values(),
                      strict=True))
    assert states == {"FAILED": 1870, "PENDING": 897, "RUNNING": 5193, "SUCCEEDED": 192}
    assert dict(zip(*f["n_gpus"].value_counts().sort("n_gpus").to_dict(as_series=False)
                    .values(), strict=True)) == {0: 1088, 1: 6989, 2: 16, 4: 15, 8: 44}
    # multi-GPU pods hold whole GPUs; gpu_milli is the pod total
    assert f.filter(f["n_gpus"] == 8)["gpu_milli"].unique().to_list() == [8000]
    assert int(f["gpu_milli"].sum()) == 6_086_800  # sum of num_gpu x gpu_milli (csv module)
    # relative seconds anchored at t0 (default 2023-01-02): pod 0 at 0 s, pod 1 at 427,061 s
    assert f["submit_ts"][0] == datetime(2023, 1, 2)
    assert f["submit_ts"][1] == datetime(2023, 1, 6, 22, 37, 41)
    moved = parse_file(shared(OPENB.format("default")),
                       opts=ParseOptions(t0=datetime.fromisoformat("2024-03-01T00:00:00+00:00")))
    assert moved.frame["submit_ts"][0] == datetime(2024, 3, 1)
    assert any("censored" in w for w in p.warnings)


def test_openb_gpuspec_variant_and_multigpu_rejected():
    p = parse_file(shared(OPENB.format("gpuspec33")))
    assert p.frame.height == 8152
    assert p.frame["gpu_kind"].null_count() == 5764  # 2,388 pods carry a GPU-type constraint
    with pytest.raises(FormatError) as exc:
        parse_file(shared(OPENB.format("multigpu50")))
    assert (exc.value.line, exc.value.column) == (1, "creation_time")


def test_openb_bad_share_names_line_and_column(tmp_path):
    rows = shared(OPENB.format("default")).read_text().splitlines()[:6]
    cells = rows[3].split(",")
    cells[4] = "1500"  # gpu_milli above one GPU
    rows[3] = ",".join(cells)
    path = tmp_path / "openb_bad.csv"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(FormatError) as exc:
        parse_file(path)
    assert (exc.value.line, exc.value.column) == (4, "gpu_milli")


def test_gpu_jobs_of_openb_and_mit(con):
    files = [shared(OPENB.format("default")), shared("mit_supercloud/slurm-log-queueing-clean.csv")]
    ingest.ingest_files(con, [ingest.FileIn(p, p.name) for p in files])
    openb = store.gpu_jobs(con, "openb_pod_list_default")
    assert len(openb) == 6203  # GPU pods that were scheduled (7,064 minus 861 pending)
    assert openb["gpu_milli"].min() == 50 and (openb["runtime_s"] > 0).all()
    mit = store.gpu_jobs(con, "slurm-log-queueing-clean")
    assert len(mit) == 2368
    assert (mit["gpu_milli"] == mit["n_gpus"] * 1000).all()  # Slurm: whole GPUs


def test_migration_6_adds_gpu_milli_to_an_old_store(tmp_path):
    db = tmp_path / "old.duckdb"
    raw = store_at_version(db, 4)
    assert "gpu_milli" not in [r[0] for r in raw.execute("DESCRIBE jobs").fetchall()]
    raw.close()
    con = store.connect(db)
    assert "gpu_milli" in [r[0] for r in con.execute("DESCRIBE jobs").fetchall()]
    assert con.execute("SELECT max(version) FROM schema_version").fetchone()[0] == \
        store.SCHEMA_VERSION
    con.close()
