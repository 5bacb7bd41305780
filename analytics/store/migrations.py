"""The store's forward migrations: :data:`MIGRATIONS` (version -> statements) up to
:data:`SCHEMA_VERSION`, which :func:`analytics.store.migrate` applies in one transaction.

The DDL is built from :data:`analytics.schema.COLUMNS` (the canonical tables), so the parsers
and the store cannot drift apart. It lives behind the store (design note, issue 28: the store is
the one package that speaks SQL; the migrations were in ``analytics/schema.py`` until they
pushed it past the 500 lines a module may have). Never edit a released step; add the next one.
"""

from __future__ import annotations

from analytics.schema import COLUMNS

SCHEMA_VERSION = 21
#: The benchmark tail percentiles of migration 21.
_PERCENTILES = ("ttft_p90_ms", "ttft_p99_ms", "itl_p90_ms", "itl_p99_ms", "tpot_ms",
                "tpot_p99_ms", "latency_p90_s", "latency_p99_s")
_ADDED_LATER = {("requests", "gpu_s"), ("jobs", "gpu_milli"), ("jobs", "mig_slice"),
                ("jobs", "elapsed_s"), ("bench_runs", "request_rate"),
                ("bench_runs", "concurrency_measured"), ("telemetry", "gpu_uuid"),
                ("bench_runs", "failed_requests"), ("bench_runs", "failed_share"),
                *(("bench_runs", c) for c in _PERCENTILES)}  # added later



def _ddl(table: str) -> str:
    cols = ",\n  ".join(f"{c} {t}" for c, t in COLUMNS[table].items()
                        if (table, c) not in _ADDED_LATER)
    return f"CREATE TABLE IF NOT EXISTS {table} (\n  dataset_id INTEGER NOT NULL,\n  {cols}\n)"


#: Forward migrations: version -> statements. Never edit a released step; add the next one.
MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE SEQUENCE IF NOT EXISTS dataset_id_seq START 1",
        """CREATE TABLE IF NOT EXISTS datasets (
          dataset_id INTEGER PRIMARY KEY,
          name VARCHAR NOT NULL UNIQUE,
          kind VARCHAR NOT NULL,
          format VARCHAR NOT NULL,
          source VARCHAR,
          sha256 VARCHAR NOT NULL UNIQUE,
          rows BIGINT NOT NULL,
          ts_min TIMESTAMP,
          ts_max TIMESTAMP,
          resolution_s DOUBLE,
          ingested_at TIMESTAMP NOT NULL,
          synthetic BOOLEAN NOT NULL DEFAULT false,
          warnings VARCHAR
        )""",
        # data_version counts every change of the ledger (ingest *and* delete); the max
        # dataset_id alone would not move when a dataset is deleted.
        "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value BIGINT)",
        "INSERT INTO meta VALUES ('data_version', 0) ON CONFLICT DO NOTHING",
        *[_ddl(t) for t in ("requests", "demand_series", "carbon_intensity", "weather",
                            "prices")],
    ],
    # GPU busy seconds per request, for traces that report execution time instead of tokens
    # (Alibaba GenAI LoRA trace: exec_time_seconds).
    2: ["ALTER TABLE requests ADD COLUMN IF NOT EXISTS gpu_s DOUBLE"],
    # GPU telemetry (NVML sampler, nvidia-smi, DCGM exporter) and reference distributions
    # (AcmeTrace power / utilisation CDFs) for overlays.
    3: [_ddl("telemetry"), _ddl("reference_cdf")],
    # batch job history (Slurm accounting) for launch-success priors and power simulation
    4: [_ddl("jobs")],
    # serving benchmarks (ML.ENERGY, Argonne, vllm bench) and the launch advisor's provenance:
    # every fitted cost model, its metrics and support envelope, and whether it was promoted
    5: [_ddl("bench_runs"),
        "CREATE SEQUENCE IF NOT EXISTS model_version_seq START 1",
        """CREATE TABLE IF NOT EXISTS model_versions (
          version INTEGER PRIMARY KEY,
          created_at TIMESTAMP NOT NULL,
          data_version BIGINT NOT NULL,
          rows BIGINT NOT NULL,
          metrics VARCHAR NOT NULL,
          envelope VARCHAR NOT NULL,
          promoted BOOLEAN NOT NULL,
          reason VARCHAR
        )"""],
    # fractional GPU requests (Alibaba openb GPU-sharing pods): total thousandths of a GPU
    6: ["ALTER TABLE jobs ADD COLUMN IF NOT EXISTS gpu_milli INTEGER"],
    # MIG slices in Slurm AllocTRES (gres/gpu:a100_3g.20gb) and sacct Elapsed; a benchmark's request rate kept
    # apart from its concurrency, and whether that concurrency was measured (issue 14)
    7: ["ALTER TABLE jobs ADD COLUMN IF NOT EXISTS mig_slice BOOLEAN",
        "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS elapsed_s DOUBLE",
        "ALTER TABLE bench_runs ADD COLUMN IF NOT EXISTS request_rate DOUBLE",
        "ALTER TABLE bench_runs ADD COLUMN IF NOT EXISTS concurrency_measured BOOLEAN"],
    # the IANA time zone a dataset's local times were converted from (--tz; issue 14 item 2)
    8: ["ALTER TABLE datasets ADD COLUMN IF NOT EXISTS source_tz VARCHAR"],
    # telemetry of several hosts: a GPU is (host, index, UUID), not its index (issue 14 item 4)
    9: ["ALTER TABLE telemetry ADD COLUMN IF NOT EXISTS gpu_uuid VARCHAR"],
    # one stored site series named by several site codes (SustainDC publishes the same carbon
    # file as CISO_... and CA_..., ERCO_... and TX_...): the bytes are kept once, under the
    # first name; every other code that arrived with the same bytes is an alias (issue 19)
    10: ["""CREATE TABLE IF NOT EXISTS site_aliases (
          dataset_id INTEGER NOT NULL,
          tbl VARCHAR NOT NULL,
          site VARCHAR NOT NULL,
          alias VARCHAR NOT NULL,
          file VARCHAR,
          PRIMARY KEY (dataset_id, alias)
        )"""],
    # named scenarios: a page's parameters saved under a name, reopened or compared side by
    # side (issue 19 item 13); not data, so saving one does not move the data version
    11: ["""CREATE TABLE IF NOT EXISTS scenarios (
          name VARCHAR PRIMARY KEY,
          page VARCHAR NOT NULL,
          params VARCHAR NOT NULL,
          saved_at TIMESTAMP NOT NULL
        )"""],
    # results of sweep tasks (issue 17): one row per (analysis, parameters, seed, code version,
    # input datasets), its result JSON, when, where and how long it ran; a rerun with the same
    # key reads the row instead of computing. Not data: writing one does not move the version.
    12: ["""CREATE TABLE IF NOT EXISTS sweep_runs (
          analysis VARCHAR NOT NULL,
          params_sha256 VARCHAR NOT NULL,
          seed BIGINT NOT NULL,
          code_version VARCHAR NOT NULL,
          inputs_sha256 VARCHAR NOT NULL,
          params VARCHAR NOT NULL,
          result VARCHAR NOT NULL,
          started_at TIMESTAMP NOT NULL,
          finished_at TIMESTAMP NOT NULL,
          cpu_s DOUBLE NOT NULL,
          wall_s DOUBLE NOT NULL,
          ran_on VARCHAR NOT NULL,
          PRIMARY KEY (analysis, params_sha256, seed, code_version, inputs_sha256)
        )"""],
    # request rows that carry only time and token counts are kept in a narrow table; the view
    # ``requests`` shows both tables as before (STORED_IN, NARROW; issue 15). A later column of
    # requests is added to requests_full and the view recreated.
    13: ["ALTER TABLE requests RENAME TO requests_full",
         """CREATE TABLE IF NOT EXISTS requests_tokens (
          dataset_id INTEGER NOT NULL,
          ts TIMESTAMP,
          prompt_tokens BIGINT,
          completion_tokens BIGINT
        )""",
         """CREATE VIEW requests AS
          SELECT dataset_id, ts, model, prompt_tokens, completion_tokens, failed, session_id,
                 latency_s, gpu_s
            FROM requests_full
          UNION ALL
          SELECT dataset_id, ts, NULL::VARCHAR AS model, prompt_tokens, completion_tokens,
                 false AS failed, NULL::VARCHAR AS session_id, NULL::DOUBLE AS latency_s,
                 NULL::DOUBLE AS gpu_s
            FROM requests_tokens"""],
    # the files a dataset was built from (issue 28: datasets that grow): one row per ingested or
    # appended file with its sha256 (a byte-identical file is refused whichever dataset holds
    # it), the rows it added and the rows dropped as already stored; the first file of every
    # dataset stored before this version is filled in from the ledger
    14: ["""CREATE TABLE IF NOT EXISTS dataset_files (
          dataset_id INTEGER NOT NULL,
          sha256 VARCHAR NOT NULL UNIQUE,
          file VARCHAR,
          format VARCHAR NOT NULL,
          rows BIGINT NOT NULL,
          dropped BIGINT NOT NULL DEFAULT 0,
          ts_min TIMESTAMP,
          ts_max TIMESTAMP,
          added_at TIMESTAMP NOT NULL
        )""",
         """INSERT INTO dataset_files (dataset_id, sha256, file, format, rows, dropped, ts_min,
                                      ts_max, added_at)
          SELECT dataset_id, sha256, source, format, rows, 0, ts_min, ts_max, ingested_at
            FROM datasets"""],
    # where each stored field came from and what the reader assumed (issue 27): per file, the
    # file's column of each canonical field (JSON object) and the assumptions (a start time,
    # an interval, a zone, a basis; JSON list); files stored before this version have neither
    # and a benchmark run's failed requests as a count and share, not a yes/no (issue 27)
    15: ["ALTER TABLE dataset_files ADD COLUMN IF NOT EXISTS sources VARCHAR",
         "ALTER TABLE dataset_files ADD COLUMN IF NOT EXISTS assumptions VARCHAR",
         "ALTER TABLE bench_runs ADD COLUMN IF NOT EXISTS failed_requests INTEGER",
         "ALTER TABLE bench_runs ADD COLUMN IF NOT EXISTS failed_share DOUBLE"],
    # the live road (issue 29): a run's configuration, and every closed bin with the band it
    # was judged against (analytics.store.live)
    16: ["""CREATE TABLE IF NOT EXISTS live_runs (
          name VARCHAR PRIMARY KEY,
          config VARCHAR NOT NULL,
          first_ts TIMESTAMP NOT NULL,
          started_at TIMESTAMP NOT NULL
        )""",
         """CREATE TABLE IF NOT EXISTS live_bins (
          name VARCHAR NOT NULL,
          ts TIMESTAMP NOT NULL,
          demand DOUBLE, prompt_tokens DOUBLE, completion_tokens DOUBLE,
          point DOUBLE, lower DOUBLE, upper DOUBLE, alpha_t DOUBLE,
          covered BOOLEAN, above BOOLEAN, alarm BOOLEAN, alarm_reason VARCHAR,
          coverage_so_far DOUBLE, gap_reason VARCHAR, samples INTEGER, resets INTEGER,
          martingale DOUBLE,
          energy_j DOUBLE, j_per_token DOUBLE, j_per_output_token DOUBLE,
          gco2_per_kwh DOUBLE, gco2_per_token DOUBLE, energy_gap_reason VARCHAR,
          refit VARCHAR,
          closed_at TIMESTAMP NOT NULL,
          PRIMARY KEY (name, ts)
        )"""],
    # request datasets left where they live (issue 28 item 4): the files an attached dataset
    # reads (JSON [path, bytes, modified]) and their columns as validated; its rows are never
    # stored (analytics.store.attached)
    17: ["""CREATE TABLE IF NOT EXISTS attached (
          dataset_id INTEGER PRIMARY KEY,
          pattern VARCHAR NOT NULL,
          form VARCHAR NOT NULL,
          files VARCHAR NOT NULL,
          columns VARCHAR NOT NULL,
          validated_at TIMESTAMP NOT NULL
        )"""],
    # request rows with a model and failed flag but no session, latency or GPU time (BurstGPT
    # v1, a canonical CSV with a model column) are kept in a third table: DuckDB spent 0.7 s of
    # CPU per 5 M rows (of 3.0 s) appending and checkpointing the three empty columns of
    # requests_full (issue 28 item 2; schema.NARROW)
    18: ["""CREATE TABLE IF NOT EXISTS requests_models (
          dataset_id INTEGER NOT NULL,
          ts TIMESTAMP,
          model VARCHAR,
          prompt_tokens BIGINT,
          completion_tokens BIGINT,
          failed BOOLEAN
        )""",
         "DROP VIEW requests",
         """CREATE VIEW requests AS
          SELECT dataset_id, ts, model, prompt_tokens, completion_tokens, failed, session_id,
                 latency_s, gpu_s
            FROM requests_full
          UNION ALL
          SELECT dataset_id, ts, NULL::VARCHAR AS model, prompt_tokens, completion_tokens,
                 false AS failed, NULL::VARCHAR AS session_id, NULL::DOUBLE AS latency_s,
                 NULL::DOUBLE AS gpu_s
            FROM requests_tokens
          UNION ALL
          SELECT dataset_id, ts, model, prompt_tokens, completion_tokens, failed,
                 NULL::VARCHAR AS session_id, NULL::DOUBLE AS latency_s, NULL::DOUBLE AS gpu_s
            FROM requests_models"""],
    # the live series is a dataset that grows (issue 29 item 2): each run names the
    # demand_series dataset its closed bins are appended to (analytics.store.live)
    19: ["ALTER TABLE live_runs ADD COLUMN IF NOT EXISTS dataset VARCHAR"],
    # each live bin's serving stats (issue 29 item 1): finished requests, mean running and
    # queued requests, KV-cache usage and the TTFT / ITL / end-to-end latency quantiles (s);
    # and what its energy was measured by (DCGM's energy counter, or its power gauge x time)
    20: ["ALTER TABLE live_bins ADD COLUMN IF NOT EXISTS energy_basis VARCHAR",
         *(f"ALTER TABLE live_bins ADD COLUMN IF NOT EXISTS {c} DOUBLE" for c in (
             "requests", "running_mean", "waiting_mean", "kv_cache_mean", "kv_cache_max",
             "ttft_p50_s", "ttft_p95_s", "itl_p50_s", "itl_p95_s", "e2e_p50_s",
             "e2e_p95_s"))],
    # the tail percentiles benchmark result files carry (issue 30 item 1)
    21: [f"ALTER TABLE bench_runs ADD COLUMN IF NOT EXISTS {c} DOUBLE" for c in _PERCENTILES],
}
