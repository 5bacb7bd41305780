"""``headroom serve-energy TRACE``: energy-aware shared-GPU serving what-ifs (Festina paper)."""

from __future__ import annotations

from pathlib import Path

from analytics.cli.common import BadInput, log, margin, nonneg, positive
from analytics.services import open_store, serving
from analytics.serving import ServingParams


def add_parsers(sub) -> None:
    """Add ``serve-energy`` to the ``headroom`` parser."""
    p = sub.add_parser("serve-energy", help="energy-aware shared-GPU serving what-ifs (Festina): "
                                            "max-clock, static DVFS, Festina and its ablation")
    p.add_argument("trace", help="request dataset in the store (e.g. AzureLLMInferenceTrace_conv)")
    p.add_argument("--policy", default="all",
                   help="all, or one of " + ", ".join(serving.ALL_POLICIES))
    p.add_argument("--models", "--n-models", dest="n_models", type=int, default=16,
                   help="co-hosted models")
    p.add_argument("--gpus", "--n-gpus", dest="n_gpus", type=int, default=8,
                   help="GPUs in the pool")
    p.add_argument("--gpu-kind", default="H100-80GB", help="H100-80GB or A100-40GB")
    p.add_argument("--safety-margin", type=margin, default=0.05,
                   help="SLO slack kept by the controllers (Festina: 5%%)")
    p.add_argument("--ttft-slo-ms", type=positive, default=1000.0)
    p.add_argument("--tbt-slo-ms", type=positive, default=100.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--window-s", type=positive, default=None,
                   help="simulate only the first seconds of the trace")
    p.add_argument("--zipf", type=nonneg, default=1.0, help="Zipf exponent of model popularity")
    p.add_argument("--dvfs-gamma", "--gamma", dest="dvfs_gamma", type=positive, default=None,
                   help="dynamic power exponent of the DVFS model (default: calibrated to the "
                        "measured decode saving of SM clock locking)")
    p.add_argument("--chunked-prefill", type=int, default=0, metavar="TOKENS",
                   help="chunked prefill with this token budget per iteration (vLLM "
                        "max_num_batched_tokens); 0 = off, a prefill pauses decode")
    p.add_argument("--static-scale", type=positive, default=1.0,
                   help="multiply the cited static (idle) power of the GPU kind")
    p.add_argument("--sensitivity", action="store_true",
                   help="also sweep gamma (calibrated, 1.5, 2, 3) x static power (x0.5, 1, 1.5) "
                        "for max-clock vs Festina")
    p.add_argument("--bench", nargs="+", default=None, metavar="DATASET",
                   help="bench datasets to build profiles from (default: all bench_runs)")
    p.add_argument("--profile", default=None, metavar="CSV",
                   help="measured profile CSV (model,gpu,phase,sm_share,clock_mhz,latency_ms,"
                        "power_w) replacing the DVFS model")
    p.set_defaults(run=serve_energy)


def serve_energy(args, settings) -> dict:
    """Every (or one) serving policy on a stored trace."""
    policies = serving.ALL_POLICIES if args.policy == "all" else (args.policy,)
    if args.policy != "all" and args.policy not in serving.ALL_POLICIES:
        raise BadInput(f"--policy {args.policy!r}: choose all or one of "
                       f"{', '.join(serving.ALL_POLICIES)}")
    if args.n_models < 1 or args.n_gpus < 1:
        raise BadInput("--models and --gpus must be >= 1")
    if args.chunked_prefill < 0:
        raise BadInput("--chunked-prefill must be >= 0 tokens (0 = off)")
    measured, measured_name = None, "uploaded profile"
    if args.profile:
        path = Path(args.profile)
        if not path.is_file():
            raise BadInput(f"{path}: " + ("is a directory, not a CSV file" if path.is_dir()
                                          else "no such file"))
        measured, measured_name = path.read_bytes(), path.name
    params = ServingParams(
        n_models=args.n_models, n_gpus=args.n_gpus, gpu=args.gpu_kind,
        ttft_slo_ms=args.ttft_slo_ms, tbt_slo_ms=args.tbt_slo_ms,
        safety_margin=args.safety_margin, zipf_s=args.zipf, gamma=args.dvfs_gamma,
        window_s=args.window_s, seed=args.seed, static_scale=args.static_scale,
        chunk_tokens=args.chunked_prefill)
    with open_store(settings.db_path) as con:
        return serving.document(con, args.trace, params, policies, measured, measured_name,
                                tuple(args.bench) if args.bench else None,
                                with_sensitivity=args.sensitivity, on_stage=log)
