"""Store: schema, ledger, ingest transaction, data_version, delete, export."""

from __future__ import annotations

import threading

import pytest
from conftest import shared
from harness import store_at_version

from analytics import store
from analytics.ingest import files as ingest


def _ingest(con, rel, name=None):
    path = shared(rel)
    return ingest.ingest_files(con, [ingest.FileIn(path, path.name, name)])


def test_schema_version_and_migration_is_idempotent(con):
    assert store.migrate(con) == store.SCHEMA_VERSION
    assert store.migrate(con) == store.SCHEMA_VERSION
    assert store.table_counts(con) == {t: 0 for t in ("datasets", *store.DATA_TABLES)}


def test_staged_files_ingest_with_exact_counts(con):
    expect = {
        "burstgpt/BurstGPT_1_head400.csv": ("requests", 400),
        "azure_llm/AzureLLMInferenceTrace_code.csv": ("requests", 8819),
        "azure_llm/AzureLLMInferenceTrace_conv.csv": ("requests", 19366),
        "mooncake/conversation_trace.jsonl.gz": ("requests", 12031),
        "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv": ("demand_series", 6366),
        "burstgpt/derived/burstgpt1_daily_requests_tokens.csv": ("demand_series", 61),
        "sustaindc_dcrl/CarbonIntensity/CISO_NG_&_avgCI.csv": ("carbon_intensity", 8760),
    }
    for rel, (kind, rows) in expect.items():
        res = _ingest(con, rel)
        assert res[0]["status"] == "ingested" and res[0]["rows"] == rows, rel
        assert store.dataset(con, res[0]["dataset"])["kind"] == kind
    ledger = store.list_datasets(con).set_index("name")
    assert ledger.loc["BurstGPT_1_head400", "rows"] == 400
    assert ledger.loc["CISO_NG_&_avgCI", "kind"] == "carbon_intensity"
    counts = store.table_counts(con)
    assert counts["requests"] == 400 + 8819 + 19366 + 12031
    assert counts["demand_series"] == 6366 + 61
    daily = store.dataset_rows(con, "burstgpt1_daily_requests_tokens")
    assert int(daily["requests"].sum()) == 1_429_737
    failed = store.dataset_rows(con, "BurstGPT_1_head400")["failed"]
    assert int(failed.sum()) == 17


def test_duplicate_bytes_reported_and_nothing_added(con):
    _ingest(con, "azure_llm/AzureLLMInferenceTrace_conv.csv")
    v = store.data_version(con)
    counts = store.table_counts(con)
    res = _ingest(con, "azure_llm/AzureLLMInferenceTrace_conv.csv", name="another_name")
    assert {k: res[0][k] for k in ("file", "dataset", "format", "rows", "status")} == {
        "file": "AzureLLMInferenceTrace_conv.csv", "dataset": "AzureLLMInferenceTrace_conv",
        "format": "azure_llm", "rows": 0, "status": "duplicate"}
    assert "delete it first" in res[0]["hint"]
    assert store.table_counts(con) == counts
    assert store.data_version(con) == v


def test_data_version_moves_on_ingest_and_delete(con):
    v0 = store.data_version(con)
    _ingest(con, "azure_llm/AzureLLMInferenceTrace_code.csv")
    _ingest(con, "burstgpt/BurstGPT_1_head400.csv")
    v1 = store.data_version(con)
    assert v1 == v0 + 2
    store.delete_dataset(con, "AzureLLMInferenceTrace_code")
    assert store.data_version(con) == v1 + 1
    assert store.table_counts(con)["requests"] == 400
    with pytest.raises(store.UnknownDataset):
        store.delete_dataset(con, "AzureLLMInferenceTrace_code")


def test_cursor_per_call_survives_threads(con):
    _ingest(con, "azure_llm/AzureLLMInferenceTrace_conv.csv")
    errors, sums = [], []

    def work():
        try:
            sums.append(len(store.dataset_rows(con, "AzureLLMInferenceTrace_conv")))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and sums == [19366] * 6


def test_store_error_carries_sql(con):
    with pytest.raises(store.StoreError) as exc, con.cursor() as cur:
        store._run(cur, "SELECT no_such_column FROM datasets")
    assert "no_such_column" in exc.value.sql


def test_reopen_keeps_data(tmp_path):
    db = tmp_path / "persist.duckdb"
    c = store.connect(db)
    _ingest(c, "burstgpt/BurstGPT_1_head400.csv")
    c.close()
    c = store.connect(db)
    assert store.table_counts(c)["requests"] == 400
    c.close()


def test_migration_from_schema_1_adds_gpu_seconds(tmp_path):
    db = tmp_path / "old.duckdb"
    raw = store_at_version(db, 1)
    cols = [r[0] for r in raw.execute("DESCRIBE requests").fetchall()]
    assert "gpu_s" not in cols
    raw.close()
    con = store.connect(db)  # migrates 1 -> 2
    cols = [r[0] for r in con.execute("DESCRIBE requests").fetchall()]
    assert cols[-1] == "gpu_s"
    _ingest(con, "burstgpt/BurstGPT_1_head400.csv")
    assert store.table_counts(con)["requests"] == 400
    con.close()


def test_migration_13_keeps_request_rows_behind_one_view(tmp_path, monkeypatch):
    """Issue 15: schema 13 renames the request table to ``requests_full`` and shows it with the
    narrow ``requests_tokens`` as the view ``requests``: a store's old rows are kept, the view
    has the canonical columns and types, a clean Azure trace read directly is kept in the
    narrow table (failed false, the rest empty) and a delete reaches it."""
    from analytics.ingest import fastcsv
    from analytics.schema import COLUMNS

    db = tmp_path / "v12.duckdb"
    raw = store_at_version(db, 12)
    raw.execute("INSERT INTO requests VALUES (7, TIMESTAMP '2024-01-01 00:00:01', 'gpt-4', 10, "
                "20, true, 's1', 1.5, 0.25), (7, TIMESTAMP '2024-01-01 00:00:02', NULL, 3, 4, "
                "false, NULL, NULL, NULL)")
    raw.close()
    con = store.connect(db)  # migrates 12 -> 13
    assert [(r[0], r[1]) for r in con.execute("DESCRIBE requests").fetchall()] == [
        ("dataset_id", "INTEGER"), *COLUMNS["requests"].items()]
    assert con.execute("SELECT * FROM requests ORDER BY ts").fetchall() == con.execute(
        "SELECT * FROM requests_full ORDER BY ts").fetchall()
    assert con.execute("SELECT model, failed, gpu_s FROM requests ORDER BY ts").fetchall() == [
        ("gpt-4", True, 0.25), (None, False, None)]

    monkeypatch.setattr(fastcsv, "FAST_MIN_BYTES", 0)  # the staged trace takes the direct read
    [res] = _ingest(con, "azure_llm/AzureLLMInferenceTrace_conv.csv")
    assert (res["rows"], res["table"]) == (19366, "requests")
    assert con.execute("SELECT count(*) FROM requests_tokens").fetchone()[0] == 19366
    assert con.execute(
        "SELECT count(*), count(*) FILTER (WHERE failed = false), count(model), "
        "count(latency_s), sum(prompt_tokens) FROM requests r JOIN datasets d USING "
        "(dataset_id) WHERE d.name = ?", [res["dataset"]]).fetchone() == (
            19366, 19366, 0, 0, con.execute(
                "SELECT sum(ContextTokens) FROM read_csv(?)",
                [str(shared("azure_llm/AzureLLMInferenceTrace_conv.csv"))]).fetchone()[0])
    from analytics.services import data

    exported = data.export(con, res["dataset"], "csv").decode().splitlines()
    assert len(exported) == 19367 and exported[0].split(",")[:3] == ["ts", "model", "prompt_tokens"]
    assert exported[1].split(",")[4] == "False"  # failed, as the view shows the narrow rows
    store.delete_dataset(con, res["dataset"])
    assert con.execute("SELECT count(*) FROM requests_tokens").fetchone()[0] == 0
    assert store.table_counts(con)["requests"] == 2
    con.close()


def test_migration_18_keeps_model_rows_in_their_own_table(tmp_path, monkeypatch):
    """Issue 28: schema 18 adds ``requests_models`` (time, model, tokens, failed) to the view
    ``requests``: a store's rows in the other two tables are kept, a BurstGPT v1 trace read
    directly is kept there with the checked reader's values (the empty session, latency and GPU
    time it leaves NULL in the view), and a delete reaches it."""
    from analytics.ingest import fastcsv
    from analytics.schema import COLUMNS

    db = tmp_path / "v17.duckdb"
    raw = store_at_version(db, 17)
    raw.execute("INSERT INTO requests_full VALUES (7, TIMESTAMP '2024-01-01 00:00:01', "
                "'gpt-4', 10, 20, true, 's1', 1.5, 0.25)")
    raw.execute("INSERT INTO requests_tokens VALUES (8, TIMESTAMP '2024-01-01 00:00:02', 3, 4)")
    raw.close()
    con = store.connect(db)  # migrates 17 -> 18
    assert [(r[0], r[1]) for r in con.execute("DESCRIBE requests").fetchall()] == [
        ("dataset_id", "INTEGER"), *COLUMNS["requests"].items()]
    assert con.execute("SELECT dataset_id, model, failed, session_id FROM requests "
                       "ORDER BY ts").fetchall() == [(7, "gpt-4", True, "s1"),
                                                     (8, None, False, None)]
    monkeypatch.setattr(fastcsv, "FAST_MIN_BYTES", 0)
    rel = "burstgpt/BurstGPT_1_head400.csv"
    [res] = _ingest(con, rel)
    assert con.execute("SELECT count(*) FROM requests_models").fetchone()[0] == res["rows"] == 400
    real = con.execute("SELECT count(*) FILTER (WHERE \"Response tokens\" = 0), "
                       "sum(\"Request tokens\"), count(DISTINCT \"Model\") FROM read_csv(?)",
                       [str(shared(rel))]).fetchone()
    assert con.execute(
        "SELECT count(*) FILTER (WHERE failed), sum(prompt_tokens), count(DISTINCT model), "
        "count(session_id) + count(latency_s) + count(gpu_s) FROM requests r JOIN datasets d "
        "USING (dataset_id) WHERE d.name = ?", [res["dataset"]]).fetchone() == (*real, 0)
    store.delete_dataset(con, res["dataset"])
    assert con.execute("SELECT count(*) FROM requests_models").fetchone()[0] == 0
    assert store.table_counts(con)["requests"] == 2
    con.close()


def test_jobs_dataset_ledger_uses_submit_times(con):
    res = _ingest(con, "mit_supercloud/slurm-log-queueing-clean.csv")
    assert res[0]["rows"] == 9628 and res[0]["table"] == "jobs"
    info = store.dataset(con, "slurm-log-queueing-clean")
    assert str(info["ts_min"]) == "2021-01-01 21:18:32"
    rows = store.dataset_rows(con, "slurm-log-queueing-clean")
    assert int((rows["n_gpus"] > 0).sum()) == 2368


def test_every_store_read_carries_its_sql(con):
    with con.cursor() as cur:
        store._run(cur, "DROP TABLE reference_cdf")
    with pytest.raises(store.StoreError) as exc:
        store.reference_cdfs(con)
    assert "reference_cdf" in exc.value.sql and "failing SQL" in str(exc.value)
    with pytest.raises(store.StoreError) as exc:
        store.table_counts(con)
    assert "count(*) FROM reference_cdf" in exc.value.sql and "reference_cdf" in str(exc.value)


def test_transaction_rolls_back_on_error(con):
    before = store.data_version(con)
    with pytest.raises(RuntimeError, match="stop"), con.cursor() as cur, store.transaction(cur):
        store._run(cur, "UPDATE meta SET value = value + 1 WHERE key = 'data_version'")
        raise RuntimeError("stop")
    assert store.data_version(con) == before
    with con.cursor() as cur, store.transaction(cur):
        store._run(cur, "UPDATE meta SET value = value + 1 WHERE key = 'data_version'")
    assert store.data_version(con) == before + 1


def test_failed_batch_writes_nothing(con):
    path = shared("burstgpt/BurstGPT_1_head400.csv")
    items = ingest.parse_all([ingest.FileIn(path, path.name, "one"),
                              ingest.FileIn(shared("azure_llm/AzureLLMInferenceTrace_code.csv"),
                                            "code.csv", "one")])
    with pytest.raises(store.NameTaken):
        store.ingest(con, items)
    assert store.table_counts(con)["requests"] == 0 and store.data_version(con) == 0
