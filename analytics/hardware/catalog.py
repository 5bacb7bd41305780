"""Accelerator spec table and hardware-name normalisation for benchmark data.

Benchmarks name hardware in many ways (``NVIDIA A100-SXM4-40GB``, ``Nvidia A100 GPU``, ``H100``,
``AMD MI300X GPU``). :func:`normalise` maps them onto the keys of :data:`SPECS`, whose numbers come
from vendor datasheets (cited per field). A field no datasheet we checked states is ``None`` and
is shown as "not stated", never guessed.

Precision names are normalised too (:func:`precision`), with the effective bits per weight used by
the launch advisor's memory model (OmniPilot paper, Sec. 3 features: "precision one-hot + effective
bits").
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Spec:
    """Datasheet numbers of one accelerator (per device).

    Attributes
    ----------
    key : canonical name used in ``bench_runs.hardware``
    vendor : NVIDIA / AMD / Intel / SambaNova
    memory_gb : device memory, GB
    mem_bw_gbs : peak memory bandwidth, GB/s
    bf16_tflops : peak dense BF16 tensor throughput, TFLOP/s (without sparsity)
    fp8_tflops : peak dense FP8 tensor throughput, TFLOP/s (``None``: no FP8 support / not stated)
    tdp_w : maximum board / module power, W
    sources : (field, citation) pairs
    """

    key: str
    vendor: str
    memory_gb: float | None
    mem_bw_gbs: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    tdp_w: float | None
    sources: tuple[tuple[str, str], ...]


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

SPECS: dict[str, Spec] = {s.key: s for s in (
    Spec("A100-40GB", "NVIDIA", 40, 1555, 312, None, 400,
         (("all", _A100 + "; 40 GB HBM2, 1,555 GB/s, 400 W"),)),
    Spec("A100-80GB", "NVIDIA", 80, 2039, 312, None, 400,
         (("all", _A100 + "; 80 GB HBM2e, 2,039 GB/s, 400 W"),)),
    Spec("H100-80GB", "NVIDIA", 80, 3350, 989.5, 1979, 700, (("all", _H100),)),
    Spec("H200-141GB", "NVIDIA", 141, 4800, 989.5, 1979, 700, (("all", _H200),)),
    Spec("GH200", "NVIDIA", 96, 4000, 989.5, 1979, None, (("all", _GH200),)),
    Spec("B200", "NVIDIA", 180, 8000, 2250, 4500, 1000, (("all", _B200),)),
    Spec("MI250", "AMD", 128, 3200, 362.1, None, 560, (("all", _MI250),)),
    Spec("MI300X", "AMD", 192, 5300, 1307.4, 2614.9, 750, (("all", _MI300X),)),
    Spec("Gaudi2", "Intel", 96, 2460, None, None, 600, (("all", _GAUDI2),)),
    Spec("Max1550", "Intel", 128, 3200, None, None, 600, (("all", _MAX1550),)),
    Spec("SN40L", "SambaNova", 64, None, None, None, None, (("all", _SN40L),)),
)}

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
    """Device memory (GB) of a canonical hardware key; ``None`` when the key is not in SPECS."""
    spec = SPECS.get(key or "")
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
