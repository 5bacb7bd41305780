"""THE GPU catalog (:data:`CATALOG`, one :class:`GpuSpec` per GPU kind, a source per value) and
hardware-name normalisation for benchmark data.

Datasheet numbers (memory, bandwidth, TFLOPS, TDP), measured idle power, list prices, reference
serving throughput and the DVFS clock range all live in one record per kind; the capacity page's
kinds (:data:`CAPACITY_KINDS`) and the serving DVFS kinds (:data:`DVFS_KINDS`) are views of it.

Benchmarks name hardware in many ways (``NVIDIA A100-SXM4-40GB``, ``Nvidia A100 GPU``, ``H100``,
``AMD MI300X GPU``). :func:`normalise` maps them onto the keys of :data:`CATALOG`. A field no
source we checked states is ``None`` and is shown as "not stated", never guessed.

Precision names are normalised too (:func:`precision`), with the effective bits per weight used by
the launch advisor's memory model (OmniPilot paper, Sec. 3 features: "precision one-hot + effective
bits").
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    """Everything headroom knows about one GPU kind, each value with its source.

    ``None`` means no source we checked states the value: it is shown as "not stated" and an
    analysis that needs it leaves the kind out (or asks the user for it), never guesses.

    Attributes
    ----------
    key : canonical name used in ``bench_runs.hardware`` and every table (``name`` is an alias)
    vendor : NVIDIA / AMD / Intel / SambaNova
    memory_gb : device memory, GB
    mem_bw_gbs : peak memory bandwidth, GB/s
    bf16_tflops : peak dense BF16 tensor throughput, TFLOP/s (without sparsity)
    fp8_tflops : peak dense FP8 tensor throughput, TFLOP/s (``None``: no FP8 / not stated)
    tdp_w : maximum board / module power, W
    idle_w : power of a powered-on GPU computing nothing (holding weights), W
    price_usd_per_h : price per GPU-hour, USD (scenario default, editable)
    ref_tok_s : reference serving throughput, output tokens/s per GPU, Llama-3.1-8B-Instruct at
        the highest-throughput batch the benchmark ran
    f_max_mhz, f_min_mhz : top SM clock and the lowest clock DVFS policies may choose, MHz
    pcie_gbs : host-to-device bandwidth for loading weights, GB/s one way
    sources : (field, citation) pairs; ``"all"`` covers every datasheet field
    """

    key: str
    vendor: str
    memory_gb: float | None
    mem_bw_gbs: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    tdp_w: float | None
    sources: tuple[tuple[str, str], ...]
    idle_w: float | None = None
    price_usd_per_h: float | None = None
    ref_tok_s: float | None = None
    f_max_mhz: float | None = None
    f_min_mhz: float | None = None
    pcie_gbs: float | None = None

    @property
    def name(self) -> str:
        """The catalog key (the name the capacity and dispatch tables use)."""
        return self.key


_A100 = "NVIDIA A100 Tensor Core GPU datasheet (2021): SXM4; BF16 312 TFLOPS dense (624 sparse)"
_H100 = ("NVIDIA H100 Tensor Core GPU datasheet (2023): H100 SXM 80 GB HBM3, 3.35 TB/s, "
         "BF16 1,979 / FP8 3,958 TFLOPS with sparsity (half dense), up to 700 W")
_H200 = ("NVIDIA H200 Tensor Core GPU datasheet (2024): 141 GB HBM3e, 4.8 TB/s, "
         "BF16 1,979 / FP8 3,958 TFLOPS with sparsity (half dense), up to 700 W")
_GH200 = ("NVIDIA GH200 Grace Hopper Superchip datasheet (2023): 96 GB HBM3, 4 TB/s; Hopper GPU "
          "FP8 3,958 / BF16 1,979 TFLOPS with sparsity (half dense); module power configurable "
          "450-1,000 W incl. CPU and memory, so no single TDP")
_B200 = ("NVIDIA HGX B200 datasheet (2024): 8 GPUs with 1,440 GB HBM3e and 64 TB/s; FP8 72 / BF16 "
         "36 PFLOPS with sparsity for 8 GPUs (per GPU: half is dense); 1,000 W per GPU")
_MI250 = ("AMD Instinct MI250 datasheet: OAM, 128 GB HBM2e, 3.2 TB/s, BF16 362.1 TFLOPS, "
          "no FP8, 560 W (two GCDs per package)")
_MI300X = ("AMD Instinct MI300X datasheet: 192 GB HBM3, 5.3 TB/s, BF16 1,307.4 / FP8 2,614.9 "
           "TFLOPS dense, 750 W")
_GAUDI2 = "Intel Gaudi 2 datasheet: 96 GB HBM2e, 2.46 TB/s, 600 W (OAM)"
_MAX1550 = ("Intel Data Center GPU Max 1550 product brief: 128 GB HBM2e, 3.2 TB/s, 600 W "
            "(Ponte Vecchio; Argonne labels it 'Intel PVC GPU' and 'Intel Max 1550')")
_SN40L = "SambaNova SN40L: 64 GB HBM per RDU (SambaNova SN40L paper, 2024); no TDP stated"

_AWS = ("AWS EC2 on-demand list price, us-east-1, for the 8-GPU instance / 8 "
        "(scenario default; edit for your contract)")
_ACME_IDLE = ("AcmeTrace (Hu et al., NSDI'24; staged acmetrace/acme_power_util_cdf.csv): Kalos "
              "A100 per-GPU DCGM power, 1st percentile 60.2 W (A100-SXM4-80GB clusters)")
_H100_IDLE = ("nvidia-smi on 'NVIDIA H100 80GB HBM3' with 72,790 MiB resident and 0 % "
              "utilisation: 140-145 W (github.com/wilicc/gpu-burn issue #114, 2024-10-25)")
_HOPPER_CLOCK = ("nvidia-smi -q -d CLOCK on an H200 (Hopper GH100, same SM clock table as H100 "
                 "SXM): Max Clocks Graphics 1980 MHz, idle clock 345 MHz "
                 "(github.com/awslabs/amazon-eks-ami pull #1985, 2024-10-01)")
_A100_CLOCK = ("A100 SXM4 nvidia-smi supported graphics clocks top out at 1410 MHz "
               "(github.com/1Panel-dev/1Panel issue #11910); no staged source states its floor, "
               "so the Hopper floor (345 MHz) is reused -- a parameter")
_PCIE5 = "NVIDIA H100 datasheet: PCIe Gen5 128 GB/s (bidirectional) -> 64 GB/s one way"
_PCIE4 = "NVIDIA A100 datasheet: PCIe Gen4 64 GB/s (bidirectional) -> 32 GB/s one way"

#: THE GPU catalog: one record per GPU kind (every other table is a view of it).
CATALOG: dict[str, GpuSpec] = {s.key: s for s in (
    GpuSpec("A100-40GB", "NVIDIA", 40, 1555, 312, None, 400,
            (("all", _A100 + "; 40 GB HBM2, 1,555 GB/s, 400 W"), ("idle_w", _ACME_IDLE),
             ("price_usd_per_h", f"p4d.24xlarge $32.7726/h; {_AWS}"),
             ("ref_tok_s", "ML.ENERGY leaderboard v2, chat, Meta-Llama-3.1-8B-Instruct, "
                           "A100-SXM4-40GB, TP1, max batch 320: 1,850.3 tok/s"),
             ("clock", _A100_CLOCK), ("pcie", _PCIE4)),
            idle_w=60.2, price_usd_per_h=32.7726 / 8, ref_tok_s=1850.3,
            f_max_mhz=1410, f_min_mhz=345, pcie_gbs=32),
    GpuSpec("A100-80GB", "NVIDIA", 80, 2039, 312, None, 400,
            (("all", _A100 + "; 80 GB HBM2e, 2,039 GB/s, 400 W"), ("idle_w", _ACME_IDLE),
             ("price_usd_per_h", f"p4de.24xlarge $40.9657/h; {_AWS}")),
            idle_w=60.2, price_usd_per_h=40.9657 / 8),
    GpuSpec("H100-80GB", "NVIDIA", 80, 3350, 989.5, 1979, 700,
            (("all", _H100), ("idle_w", _H100_IDLE),
             ("price_usd_per_h", f"p5.48xlarge $98.32/h (2024 list); {_AWS}"),
             ("ref_tok_s", "ML.ENERGY leaderboard v3, lm-arena-chat, Llama-3.1-8B-Instruct, "
                           "H100, TP1, max_num_seqs 512: 9,806 tok/s"),
             ("clock", _HOPPER_CLOCK), ("pcie", _PCIE5)),
            idle_w=140.0, price_usd_per_h=98.32 / 8, ref_tok_s=9806.0,
            f_max_mhz=1980, f_min_mhz=345, pcie_gbs=64),
    GpuSpec("H200-141GB", "NVIDIA", 141, 4800, 989.5, 1979, 700, (("all", _H200),)),
    GpuSpec("GH200", "NVIDIA", 96, 4000, 989.5, 1979, None, (("all", _GH200),)),
    GpuSpec("B200", "NVIDIA", 180, 8000, 2250, 4500, 1000,
            (("all", _B200),
             ("ref_tok_s", "ML.ENERGY leaderboard v3, lm-arena-chat, Llama-3.1-8B-Instruct, "
                           "B200, TP1, max_num_seqs 2048: 14,799 tok/s")),
            ref_tok_s=14799.0),
    GpuSpec("MI250", "AMD", 128, 3200, 362.1, None, 560, (("all", _MI250),)),
    GpuSpec("MI300X", "AMD", 192, 5300, 1307.4, 2614.9, 750, (("all", _MI300X),)),
    GpuSpec("Gaudi2", "Intel", 96, 2460, None, None, 600, (("all", _GAUDI2),)),
    GpuSpec("Max1550", "Intel", 128, 3200, None, None, 600, (("all", _MAX1550),)),
    GpuSpec("SN40L", "SambaNova", 64, None, None, None, None, (("all", _SN40L),)),
)}

#: Views of :data:`CATALOG`: the kinds the capacity / dispatch pages offer (NVIDIA data-centre
#: parts with a datasheet TDP), and the kinds with a cited clock range and static power (the
#: serving DVFS model needs both).
CAPACITY_KINDS: tuple[GpuSpec, ...] = tuple(
    CATALOG[k] for k in ("A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "B200"))
DVFS_KINDS: dict[str, GpuSpec] = {  # the serving page's default first
    k: CATALOG[k] for k in ("H100-80GB", "A100-40GB")}


def source_of(spec: GpuSpec, field_name: str) -> str | None:
    """Citation of one field of a record (the datasheet citation ``"all"`` as a fallback)."""
    found = dict(spec.sources)
    return found.get(field_name) or found.get("all")


# (pattern, key): first match wins; matched against the lower-cased name with spaces/underscores
# turned into '-'.
_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"gh200", "GH200"),
    (r"a100.*80", "A100-80GB"),
    (r"a100", "A100-40GB"),  # ML.ENERGY v2 A100-SXM4-40GB; Argonne Polaris nodes (A100 40 GB)
    (r"h200", "H200-141GB"),
    (r"h100", "H100-80GB"),
    (r"b200", "B200"),
    (r"mi300x", "MI300X"),
    (r"mi250", "MI250"),
    (r"gaudi-?2", "Gaudi2"),
    (r"max-?1550|pvc", "Max1550"),
    (r"sn40l", "SN40L"),
)


def normalise(name: str | None) -> str | None:
    """Canonical hardware key for a benchmark's hardware label, or the label itself if unknown.

    >>> normalise("NVIDIA A100-SXM4-40GB"), normalise("Nvidia H100 GPU"), normalise("Intel PVC GPU")
    ('A100-40GB', 'H100-80GB', 'Max1550')
    >>> normalise("TPU v5e")
    'TPU v5e'
    """
    if name is None:
        return None
    low = re.sub(r"[\s_]+", "-", name.strip().lower())
    for pattern, key in _PATTERNS:
        if re.search(pattern, low):
            return key
    return name.strip()


def memory_gb(key: str | None) -> float | None:
    """Device memory (GB) of a canonical hardware key; ``None`` when the key is not in CATALOG."""
    spec = CATALOG.get(key or "")
    return None if spec is None else spec.memory_gb


#: effective bits per weight (mxfp4: 4-bit elements plus one 8-bit scale per 32 -> 4.25)
PRECISION_BITS = {"bf16": 16.0, "fp16": 16.0, "fp8": 8.0, "int8": 8.0, "int4": 4.0,
                  "mxfp4": 4.25}


def precision(name: str | None) -> str:
    """Canonical precision name (``bf16``, ``fp16``, ``fp8``, ``int8``, ``int4``, ``mxfp4``).

    >>> precision("bfloat16"), precision("float16"), precision("FP8"), precision(None)
    ('bf16', 'fp16', 'fp8', 'bf16')
    """
    if name is None or not str(name).strip():
        return "bf16"
    low = str(name).strip().lower()
    aliases = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float8": "fp8",
               "fp8_e4m3": "fp8", "e4m3": "fp8", "awq": "int4", "gptq": "int4"}
    return aliases.get(low, low)
