"""Telemetry file formats (nvidia-smi CSV, DCGM Prometheus text, canonical telemetry CSV) ->
the ``telemetry`` table, and their rejections with line and column."""

from __future__ import annotations

import pandas as pd
import pytest

from analytics import store
from analytics.ingest import files as ingest
from analytics.ingest.formats import FormatError, parse_file

SMI = """timestamp, index, name, power.draw [W], utilization.gpu [%], memory.used [MiB], \
temperature.gpu, clocks.sm [MHz], clocks.mem [MHz]
2024/05/10 12:00:00.123, 0, NVIDIA H100 80GB HBM3, 69.12 W, 0 %, 4 MiB, 33, 345 MHz, 2619 MHz
2024/05/10 12:00:00.125, 1, NVIDIA H100 80GB HBM3, [N/A], 0 %, 4 MiB, 31, 345 MHz, 2619 MHz
2024/05/10 12:00:01.124, 0, NVIDIA H100 80GB HBM3, 412.50 W, 97 %, 70213 MiB, 61, 1980 MHz, \
2619 MHz
"""

DCGM = """# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",device="nvidia0",Hostname="node1"} 132.5 1715342400000
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a",device="nvidia0",Hostname="node1"} 0.21 1715342400000
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",device="nvidia1",Hostname="node1"} 70.0 1715342400000
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a",Hostname="node1"} 5000000 1715342400000
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",device="nvidia0",Hostname="node1"} 189.0 1715342460000
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a",device="nvidia0",Hostname="node1"} 0.51 1715342460000
"""


def test_nvidia_smi_and_dcgm_ingest_exact_rows(con, tmp_path):
    (tmp_path / "node7.csv").write_text(SMI)
    (tmp_path / "scrape.prom").write_text(DCGM)
    res = ingest.ingest_files(con, [ingest.FileIn(tmp_path / "node7.csv", "node7.csv"),
                                    ingest.FileIn(tmp_path / "scrape.prom", "scrape.prom")])
    assert [(r["format"], r["rows"]) for r in res] == [("nvidia_smi", 3), ("dcgm_prometheus", 3)]
    smi = store.dataset_rows(con, "node7")
    assert smi["power_w"].tolist()[0] == 69.12 and pd.isna(smi["power_w"].tolist()[1])
    assert set(smi["host"]) == {"node7"}
    dcgm = store.dataset_rows(con, "scrape")
    g0 = dcgm[dcgm["gpu_id"] == 0].reset_index()
    assert g0["sm_active"].tolist() == [0.21, 0.51]
    assert g0["energy_j"].iloc[0] == 5000.0  # mJ -> J
    assert str(g0["ts"].iloc[1]) == "2024-05-10 12:01:00"


@pytest.mark.parametrize(("name", "text", "line", "column"), [
    ("bad.csv", SMI.replace("412.50 W", "lots W"), 4, "power.draw"),
    ("ragged.csv", SMI.replace(", 61, 1980", ", 61"), 4, 9),
    ("bad_ts.csv", SMI.replace("2024/05/10 12:00:00.125", "yesterday"), 3, "timestamp"),
    ("bad.prom", DCGM.replace(" 0.51 ", " lots "), 8, None),
    ("garbled.prom", DCGM.replace('DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a",device="nvidia0",'
                                  'Hostname="node1"} 0.21',
                                  'DCGM_FI_PROF_SM_ACTIVE{gpu="0" 0.21'), 4, 1),
])
def test_malformed_telemetry_rejected_with_line(tmp_path, name, text, line, column):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(FormatError) as exc:
        parse_file(path)
    assert exc.value.line == line
    if column is not None:
        assert exc.value.column == column


def test_generic_canonical_telemetry_csv(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("ts,host,gpu_id,power_w,sm_active\n"
                    "2024-05-10T12:00:00Z,n1,0,120.5,0.2\n"
                    "2024-05-10T12:00:01Z,n1,0,310.0,0.8\n")
    p = parse_file(path)
    assert (p.format, p.table, p.frame.height) == ("canonical", "telemetry", 2)
    assert p.frame["power_w"].to_list() == [120.5, 310.0]
