"""Parameters of the serving what-ifs and the registry of serving policies.

Owns :class:`ServingParams` (one :func:`analytics.params.knob` per what-if parameter: help, unit
and bounds written once, so the CLI flags and the widget help can be generated from it),
:func:`check_params`, the simulator constants, and the policy records (:class:`Policy`) with
their registry (:data:`POLICY_REGISTRY`, :func:`register_policy`, :func:`get_policy`).

Policies (Festina Sec. 4: baselines and the five-stage ablation, Fig. 13)
    ``max_clock``  all GPUs on at the top clock, SLO-aware least-loaded dispatch, equal SM shares
                   among busy tenants, models spread round-robin (as MuxServe / Aegaeon run:
                   Festina Fig. 1).
    ``static_dvfs`` the same placement, one fixed clock per GPU: the lowest clock that meets both
                   SLOs (with the safety margin) at the worst batch and prefill backlog that GPU
                   saw in the max-clock run, not below its residents' energy-optimal clocks
                   (DynamoLLM-style, worst case); then up to 3 re-provisioning rounds raise the
                   clock of GPUs whose SLO attainment fell > 1 pp below max-clock's.
    ``stage1``     SLO-aware dispatch: identical to ``max_clock`` (the ablation's baseline).
    ``stage2``     + frequency-aware dispatch: per-GPU dynamic clock pinned by the most demanding
                   busy tenant (never below a phase's energy-optimal clock); requests go to the
                   SLO-safe replica with the lowest lookup energy, within 2 % by most free memory
                   then most free SMs.
    ``stage3``     + fine-grained runtime: the clock is Festina Eq. 9 over busy tenants' phases,
                   SM shares proportional to each tenant's SLO need (the clock is raised until the
                   shares fit).
    ``stage4``     + SLO-aware placement: serverless. The run starts warm like the baselines,
                   packed by SLO need (best-fit decreasing of each model's lookup need at its
                   mean rate, :meth:`analytics.serving.placement.Placement.warm_start`; unused
                   GPUs off); idle replicas are unloaded after the keep-alive and empty GPUs
                   powered off; later loads (cold start = weights / PCIe bandwidth) go to the
                   energy-ranked SLO-safe GPU (2 % tie-break), and a GPU is powered on only when
                   no on-GPU is safe.
    ``festina``    (= stage 5) + EWR consolidation: every ``consolidation_s`` the Energy Waste
                   Ratio (static energy / total energy in the window) of each powered-on GPU is
                   computed; GPUs above ``ewr_threshold`` whose models all fit elsewhere (memory +
                   SLO lookup) are drained and powered down. The EWR definition is ours: the
                   staged paper text names the metric but not its formula.
"""

from __future__ import annotations

from dataclasses import dataclass

from analytics import params as knobs
from analytics.params import knob

RETRY_S = 0.1  # a request that finds no memory for its model retries after this long (s)
STATIC_ROUNDS = 3  # static DVFS re-provisioning rounds (clock up where SLOs slipped)
TIE_BREAK = 0.02  # Festina Sec. 3.3: candidates within 2 % energy are ties


@dataclass(frozen=True)
class ServingParams:
    """What-if parameters (each field is a :func:`analytics.params.knob`: help, unit, bounds).

    Attributes
    ----------
    n_models : co-hosted models (profiles are cycled when the bench has fewer)
    n_gpus : GPUs in the pool
    gpu : GPU kind (key of :data:`analytics.serving.dvfs.GPU_DVFS`)
    ttft_slo_ms, tbt_slo_ms : SLOs (parameters; the staged paper text gives no values)
    safety_margin : fraction of each SLO kept as slack by the controllers (Festina: 5 %)
    zipf_s : Zipf exponent of model popularity (parameter)
    kv_factor : KV-cache budget reserved per resident model, as a fraction of its weights
        (parameter: the bench rows carry no KV size)
    mem_util : usable fraction of GPU memory (vLLM ``gpu_memory_utilization`` default 0.9)
    chunk_tokens : chunked-prefill token budget per iteration (0 = off: a prefill pauses
        decode); vLLM's ``max_num_batched_tokens``
    keep_alive_s : serverless keep-alive: an idle replica is unloaded after this long (stages 4-5;
        parameter) and a GPU left without models is powered off
    consolidation_s : period of EWR consolidation, s (parameter)
    ewr_threshold : EWR above which a GPU is a consolidation candidate (parameter)
    dvfs_gamma : dynamic-power exponent of the DVFS model; None (default) calibrates it to the
        measured decode saving of clock locking (:func:`analytics.serving.dvfs.calibrate_gamma`)
    static_scale : multiplies the cited static floor ``GpuDvfs.idle_w`` (sensitivity studies;
        1 = as measured)
    n_clocks : clock grid points between f_min and f_max
    window_s : simulate only the first ``window_s`` seconds of the trace (None: all); with the
        quantile length predictor, of the replay after the fit window
    seed : seed of the model assignment (and of the oracle predictor's noise)
    length_predictor : how the schedulers learn output lengths
        (:mod:`analytics.serving.prediction`): ``oracle`` (true length x (1 + e), e uniform
        within +-``length_error``) or ``quantile`` (per-model quantile of the fit window)
    length_error : the noisy oracle's multiplicative error level (Festina Fig. 7: 2.5, 5,
        10 %; default 5 %, the middle one; 0 = true lengths)
    length_quantile : quantile of the quantile predictor
    length_fit_s : seconds at the start of the trace the quantile predictor is fitted on; its
        replay starts after them
    """

    n_models: int = knob(16, "co-hosted models (bench profiles cycled when fewer)", lo=1,
                         flag="--models", aliases=("--n-models",))
    n_gpus: int = knob(8, "GPUs in the pool", lo=1, flag="--gpus", aliases=("--n-gpus",))
    gpu: str = knob("H100-80GB", "GPU kind with a cited clock range and idle power "
                    "(H100-80GB or A100-40GB)", flag="--gpu-kind")
    ttft_slo_ms: float = knob(1000.0, "time-to-first-token SLO", "ms", 0, 3.6e6, lo_open=True)
    tbt_slo_ms: float = knob(100.0, "time-between-tokens SLO (per-request mean)", "ms", 0, 3.6e6,
                             lo_open=True)
    safety_margin: float = knob(0.05, "slack kept below each SLO by the controllers "
                                "(Festina: 5 %)", "", 0, 0.99)
    zipf_s: float = knob(1.0, "Zipf exponent of model popularity", "", 0, 10, flag="--zipf")
    kv_factor: float = knob(0.5, "KV-cache budget per resident model, as a fraction of its "
                            "weights")
    mem_util: float = knob(0.9, "usable fraction of GPU memory (vLLM gpu_memory_utilization)")
    chunk_tokens: int = knob(0, "chunked-prefill token budget per iteration (vLLM "
                             "max_num_batched_tokens); 0 = off, a prefill pauses decode",
                             "tokens", lo=0, flag="--chunked-prefill")
    keep_alive_s: float = knob(60.0, "serverless keep-alive: an idle replica is unloaded after "
                               "this long (stages 4-5)", "s")
    consolidation_s: float = knob(60.0, "period of EWR consolidation (Festina)", "s")
    ewr_threshold: float = knob(0.5, "energy waste ratio above which a GPU is a consolidation "
                                "candidate")
    dvfs_gamma: float | None = knob(None, "SM dynamic power exponent, P ~ f^gamma (default: "
                                    "calibrated to the measured decode saving of SM clock "
                                    "locking; CMOS textbook: 3)", "", 0, 10, lo_open=True,
                                    aliases=("--gamma",))
    static_scale: float = knob(1.0, "multiplies the cited static (idle) power of the GPU kind",
                               "", 0, 100, lo_open=True)
    n_clocks: int = knob(24, "clock grid points between the lowest and the top SM clock")
    window_s: float | None = knob(None, "simulate only the first seconds of the trace "
                                  "(default: all)", "s", 0, 1e9, lo_open=True)
    seed: int = knob(0, "seed of the model assignment and of the oracle predictor's noise")
    length_predictor: str = knob("oracle", "output-length predictor the schedulers read: oracle "
                                 "(true length x (1 + e), e uniform within +-length_error) or "
                                 "quantile (per-model quantile of the lengths in the first "
                                 "length_fit_s seconds, which are then not replayed)",
                                 choices=("oracle", "quantile"))
    length_error: float = knob(0.05, "multiplicative error level of the oracle length predictor "
                               "(Festina Fig. 7: 0.025, 0.05, 0.10; 0 = true lengths)", "", 0,
                               0.9)
    length_quantile: float = knob(0.5, "quantile of the observed output lengths the quantile "
                                  "predictor uses per model", "", 0, 1)
    length_fit_s: float = knob(600.0, "seconds at the start of the trace the quantile length "
                               "predictor is fitted on (not replayed)", "s", 0, 1e9,
                               lo_open=True)


def check_params(params: ServingParams) -> None:
    """Raise ValueError naming the first out-of-range what-if parameter (its knob's bounds,
    :func:`analytics.params.check`)."""
    knobs.check(params)


@dataclass(frozen=True)
class Policy:
    """One serving policy: which clock rule the local scheduler runs and which global
    decisions are on (see the module docstring for each registered policy).

    Attributes
    ----------
    name : registry key (CLI ``--policy``)
    label : ablation label (``""`` for the baselines)
    clock : local clock rule: ``"max"`` (top clock), ``"static"`` (one provisioned clock per
        GPU), ``"pinned"`` (raised to the neediest tenant), ``"eq9"`` (Festina Eq. 9)
    energy_routing : route to the SLO-safe replica with the lowest lookup energy (else the
        lowest predicted TTFT)
    adaptive_share : SM shares follow each tenant's SLO need (else equal shares)
    serverless : replicas load and unload on demand, empty GPUs power off
    consolidate : periodic EWR consolidation
    """

    name: str
    label: str = ""
    clock: str = "max"
    energy_routing: bool = False
    adaptive_share: bool = False
    serverless: bool = False
    consolidate: bool = False

    @property
    def fixed_clock(self) -> bool:
        """True for the clock rules that never follow load (``max``, ``static``)."""
        return self.clock in ("max", "static")

    def idle_clock_mhz(self, static_clock_mhz: float, grid_min_mhz: float,
                       f_max_mhz: float) -> float:
        """Clock of a powered-on GPU with no busy replica, MHz: the top clock (``max``), the
        provisioned one (``static``), else the lowest grid clock."""
        if self.clock == "max":
            return f_max_mhz
        return static_clock_mhz if self.clock == "static" else grid_min_mhz


#: registered policies by name (insertion order: baselines, then the ablation stages)
POLICY_REGISTRY: dict[str, Policy] = {}


def register_policy(policy: Policy) -> Policy:
    """Add ``policy`` to :data:`POLICY_REGISTRY` (a new policy is one call). Raises ValueError
    on an unknown clock rule or a name already taken."""
    if policy.clock not in ("max", "static", "pinned", "eq9"):
        raise ValueError(f"policy {policy.name!r}: unknown clock rule {policy.clock!r}")
    if policy.name in POLICY_REGISTRY:
        raise ValueError(f"policy {policy.name!r} is already registered")
    POLICY_REGISTRY[policy.name] = policy
    return policy


def get_policy(name: str) -> Policy:
    """The registered policy ``name``. Raises ValueError naming the registered ones."""
    try:
        return POLICY_REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from "
                         f"{', '.join(POLICY_REGISTRY)}") from None


for _policy in (
        Policy("max_clock"),
        Policy("static_dvfs", clock="static"),
        Policy("stage1", "1 SLO-aware dispatch"),
        Policy("stage2", "2 + frequency-aware dispatch", "pinned", energy_routing=True),
        Policy("stage3", "3 + fine-grained runtime", "eq9", True, adaptive_share=True),
        Policy("stage4", "4 + SLO-aware placement", "eq9", True, True, serverless=True),
        Policy("festina", "5 + consolidation (Festina)", "eq9", True, True, True, True)):
    register_policy(_policy)

POLICIES = ("max_clock", "static_dvfs", "festina")
STAGES = ("stage1", "stage2", "stage3", "stage4", "festina")
STAGE_LABELS = {k: POLICY_REGISTRY[k].label for k in STAGES}
