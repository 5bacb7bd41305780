"""Settings and frozen parameter records shared by the CLI, the cache layer and the pages.

Nothing here touches data: it only says where things are and which knobs an analysis takes.
"""

from __future__ import annotations

import os
import re
import zoneinfo
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from analytics.hardware.catalog import CAPACITY_KINDS, GpuSpec

REPO_ROOT = Path(__file__).resolve().parent.parent

#: Default start instant for traces whose timestamps are relative (BurstGPT seconds from 0:00 of
#: the first day, Mooncake milliseconds from the first request). BurstGPT does not publish its
#: calendar dates, so the default is an arbitrary Monday: weekdays and dates derived from it are
#: *relative*, only hour-of-day and the order of days are real.
DEFAULT_T0 = datetime(2023, 1, 2, tzinfo=UTC)

#: ``bench_runs.source`` of the synthetic demo's roofline-model grid
#: (:func:`analytics.ingest.demo.synthetic_bench`): never preferred over a measured source
SYNTHETIC_SOURCE = "SYNTHETIC demo (roofline model)"

#: A step between two telemetry samples of one GPU longer than this many median sampling
#: steps is a logging gap: power there was not measured (issue 27: a stopped logger, a DST jump
#: read without --tz). The ingest names such gaps; energy from power counts measured spans only.
GAP_STEPS = 5.0

#: A serving-benchmark run whose failed requests exceed this share of those sent is flagged
#: (``bench_runs.failed``: left out of the launch advisor's fit); below it the run stays usable,
#: its throughput and latency counting the successes only (issue 27, vLLM PR #26478).
HEAVY_FAILURE_SHARE = 0.05

#: Upload cap in megabytes (mirrors ``server.maxUploadSize`` in ``.streamlit/config.toml``); a full
#: BurstGPT release file is 52-220 MB.
MAX_UPLOAD_MB = 400


def cache_dir_for(db_path: Path) -> Path:
    """The folder of fitted-model caches beside the store ``db_path``: ``<store stem>-cache``
    (:attr:`Settings.cache_dir`)."""
    db_path = Path(db_path)
    return db_path.parent / f"{db_path.stem}-cache"


@dataclass(frozen=True)
class Settings:
    """Where headroom keeps its store and looks for raw files.

    Attributes
    ----------
    db_path : Path
        DuckDB file. ``$HEADROOM_DB`` or ``data/headroom.duckdb``.
    data_dir : Path
        Folder scanned on first run for recognised files. ``$HEADROOM_DATA_DIR`` or ``data/raw``.
    max_upload_mb : int
        Largest file the browser upload accepts.
    upload_dir : Path
        Where browser uploads are streamed before parsing: ``uploads-tmp`` beside the store.
        The app removes temporaries a stopped server left there when it starts.
    cache_dir : Path
        Disk caches of fitted models beside the store: ``<store stem>-cache`` (JSON, Parquet and
        LightGBM model text keyed by data version, parameters and code version; never pickle).
    debug : bool
        ``$HEADROOM_DEBUG=1``: the app lets an unexpected error through with its traceback
        (development and tests); otherwise the page shows a short message with an error id and
        the details go to the server log only.
    """

    db_path: Path
    data_dir: Path
    max_upload_mb: int = MAX_UPLOAD_MB
    debug: bool = False

    @property
    def upload_dir(self) -> Path:
        return self.db_path.parent / "uploads-tmp"

    @property
    def cache_dir(self) -> Path:
        return cache_dir_for(self.db_path)

    @classmethod
    def from_env(cls) -> Settings:
        """Read ``HEADROOM_DB``, ``HEADROOM_DATA_DIR`` (falling back to the repo's ``data/``)
        and ``HEADROOM_DEBUG``."""
        db = os.environ.get("HEADROOM_DB") or str(REPO_ROOT / "data" / "headroom.duckdb")
        raw = os.environ.get("HEADROOM_DATA_DIR") or str(REPO_ROOT / "data" / "raw")
        debug = os.environ.get("HEADROOM_DEBUG", "") not in ("", "0", "false")
        return cls(db_path=Path(db), data_dir=Path(raw), debug=debug)


#: ``ParseOptions.carbon_basis`` values: every basis in a carbon file, life-cycle or direct only.
CARBON_BASES = ("all", "LCA", "direct")


@dataclass(frozen=True)
class ParseOptions:
    """Options a format may need to turn a file into canonical rows.

    Attributes
    ----------
    t0 : datetime
        UTC instant that relative timestamps count from (see ``DEFAULT_T0``).
    site : str or None
        Site name for carbon / weather / price files; default is taken from the file name.
    year : int
        Calendar year given to typical-year (TMY) weather records, whose own year field mixes
        years month by month. Default 2022, the year of the SustainDC carbon files.
    max_backstep_s : float
        How far a request timestamp may go backwards before the file is rejected as
        non-monotone (seconds).
    fields : tuple of str or None
        Column names of a header-less CSV log, in order: the ``--query-gpu`` list an
        ``nvidia-smi --format=csv,noheader`` log was written with (``timestamp, index,
        power.draw, ...``). None = the file has a header.
    carbon_basis : str
        Which carbon-intensity basis an Electricity Maps / Green-DCC file gives: ``"all"``
        (default: every basis in the file, one row per hour and basis), ``"LCA"`` (life-cycle)
        or ``"direct"`` (combustion only).
    tz : str or None
        IANA time zone (``America/New_York``) that a file's times *without an offset* were
        written in (``sacct``, nvidia-smi, ...): formats that carry such local times convert
        them to UTC, handling the repeated and the skipped DST hour
        (:mod:`analytics.ingest.localtime`). ``None``: read as UTC. Values with an offset keep
        theirs; formats whose times are UTC or relative ignore it and say so.

    hardware : str or None
        GPU that ran serving-benchmark results which do not say (SGLang ``bench_serving``
        JSON Lines; ``vllm bench serve`` results without ``--metadata hardware=...``), e.g.
        ``H100``; a hardware the file names wins.
    tp : int or None
        Tensor-parallel degree of those runs (None: the file's value, else 1 with a note).
    precision : str or None
        Weight precision of those runs (``bf16``, ``fp8`` ...; None: the file's, else bf16).
    scrape_interval_s : float or None
        Seconds between the scrapes of a DCGM exporter file that appends several scrapes
        without timestamps (``curl .../metrics >> file`` every N s): scrape k is placed at
        ``t0 + k * scrape_interval_s`` (an assumption the report states). None: such a file is
        refused at its second scrape.
    t0_given : bool
        Whether the user set ``t0`` (``--t0``, the Data page's start date): the report then
        says the start time was given, not assumed.

    Raises
    ------
    ValueError
        ``tz`` is not an IANA zone name (:func:`check_zone`).
    """

    t0: datetime = DEFAULT_T0
    site: str | None = None
    year: int = 2022
    max_backstep_s: float = 1.0
    fields: tuple[str, ...] | None = None
    carbon_basis: str = "all"
    tz: str | None = None
    hardware: str | None = None
    tp: int | None = None
    precision: str | None = None
    scrape_interval_s: float | None = None
    t0_given: bool = False

    def __post_init__(self):
        if self.tz is not None:
            check_zone(self.tz)
        if self.scrape_interval_s is not None and not 0 < self.scrape_interval_s <= 86400:
            raise ValueError(f"scrape interval {self.scrape_interval_s!r} s: give seconds in "
                             "(0, 86400]")


def check_zone(name: str) -> str:
    """Return ``name`` when it is an IANA time-zone name the tz database (:mod:`zoneinfo`) knows.

    Raises
    ------
    ValueError
        Unknown or malformed name; the message gives examples and where to find the names.

    >>> check_zone("Europe/Berlin")
    'Europe/Berlin'
    """
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        raise ValueError(
            f"unknown time zone {name!r}: give an IANA name such as America/New_York, "
            "Europe/Berlin or UTC (the list: zoneinfo.available_timezones())") from exc
    return name


def time_zones() -> list[str]:
    """IANA zone names of the tz database, sorted (the Data page's time-zone choices)."""
    return sorted(zoneinfo.available_timezones())


def field_list(text: str | None) -> tuple[str, ...] | None:
    """A comma-separated field list (``"timestamp,index,power.draw [W]"``, as given to
    ``nvidia-smi --query-gpu``) as :attr:`ParseOptions.fields`; unit suffixes in brackets are
    dropped, blank text is None.

    >>> field_list("timestamp, index,power.draw [W]")
    ('timestamp', 'index', 'power.draw')
    >>> field_list("  ") is None
    True
    """
    if text is None or not text.strip():
        return None
    out = []
    for f in text.split(","):
        name = f.strip()
        if "[" in name:
            name = name[: name.index("[")].strip()
        out.append(name.lower())
    return tuple(out)


#: A dataset name: letters, digits, ``.``, ``_``, ``-`` and ``&`` (SustainDC's
#: ``CISO_NG_&_avgCI``), starting with a letter or digit, at most 100 characters. Names are
#: shown in pages, charts and file names, so nothing in one can act as Markdown, HTML (no
#: ``<``, ``>`` or ``;``) or a path.
DATASET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._&-]{0,99}")


def check_dataset_name(name: str) -> str:
    """Return ``name`` if it is a valid dataset name (:data:`DATASET_NAME`).

    Raises
    ------
    ValueError
        Any other character, or too long; the message says what is allowed.

    >>> check_dataset_name("metrics-node-a")
    'metrics-node-a'
    """
    if not DATASET_NAME.fullmatch(str(name)):
        raise ValueError(f"dataset name {str(name)[:60]!r} is not allowed: use letters, digits, "
                         "'.', '_', '-' and '&' (up to 100, starting with a letter or digit)")
    return name


def safe_dataset_name(text: str) -> str:
    """A valid dataset name made from ``text`` (a file stem, a host): every run of other
    characters becomes ``_``, leading ``._&-`` are dropped, cut to 100; ``dataset`` if nothing
    is left.

    >>> safe_dataset_name("![x](http://a/b.png) trace")
    'x_http_a_b.png_trace'
    """
    name = re.sub(r"[^A-Za-z0-9._&-]+", "_", str(text)).lstrip("._&-")[:100].rstrip("_")
    return name or "dataset"


@dataclass(frozen=True)
class Weights:
    """Weights of the demand target ``weighted tokens = w_prompt*prompt + w_completion*completion``.

    The defaults (1, 1) make the target the plain token total, the quantity BurstGPT reports as
    ``Total tokens``. Raising ``w_completion`` expresses that decode tokens cost more GPU time than
    prefill tokens (decode is memory-bound and runs one token per step); pick it from your own
    serving measurements. ``per_model`` overrides both weights for a model name, e.g.
    ``{"GPT-4": (2.0, 4.0)}``.

    ``target = "gpu_seconds"`` uses the GPU busy seconds a trace reports instead of tokens
    (Alibaba GenAI LoRA trace ``exec_time_seconds``); the token weights then do not apply.
    """

    w_prompt: float = 1.0
    w_completion: float = 1.0
    per_model: tuple[tuple[str, float, float], ...] = field(default_factory=tuple)
    include_failed: bool = True
    target: str = "weighted_tokens"

    def __post_init__(self):
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {self.target!r}")
        object.__setattr__(self, "target", DemandTarget(self.target))


class DemandTarget(StrEnum):
    """What one bin of a demand grid counts (the *demand target*; not to be confused with the
    overbooking ``violation_target`` or a cold-start ``target_trace``).

    ``WEIGHTED_TOKENS``: ``w_prompt * prompt_tokens + w_completion * completion_tokens`` per bin
    (conformal demand envelopes paper, Sec. 3); ``GPU_SECONDS``: GPU busy seconds per bin, for
    traces that report execution time and no tokens (Alibaba GenAI LoRA ``exec_time_seconds``).
    The values are the strings the CLI and the store use.

    >>> DemandTarget("gpu_seconds").label, DemandTarget.WEIGHTED_TOKENS == "weighted_tokens"
    ('GPU-seconds', True)
    """

    WEIGHTED_TOKENS = "weighted_tokens"
    GPU_SECONDS = "gpu_seconds"

    @property
    def label(self) -> str:
        """Unit label of one bin, for charts and tables."""
        return {"weighted_tokens": "weighted tokens", "gpu_seconds": "GPU-seconds"}[self.value]

    @property
    def description(self) -> str:
        """One line saying how the target is computed (CLI documents, page captions)."""
        if self is DemandTarget.GPU_SECONDS:
            return "GPU-seconds per bin"
        return "weighted tokens per bin (w_prompt*prompt + w_completion*completion)"


#: Demand targets a request grid can be built on (the values of :class:`DemandTarget`).
TARGETS = tuple(t.value for t in DemandTarget)


#: Bin widths offered in the UI, in seconds.
BIN_CHOICES_S = {"10s": 10, "30s": 30, "1min": 60, "5min": 300, "15min": 900, "1h": 3600,
                 "1d": 86400}

#: Most bins a page will draw or fit (finer bins are offered only for short traces).
MAX_PAGE_BINS = 50_000

#: Fewest bins an envelope page offers a bin for: with the default 0.69 / 0.15 / 0.16 split that
#: leaves about 22 calibration bins, twice the ``ceil(1/alpha) + 1 = 11`` that alpha = 0.1 needs
#: (feature lags use some of them).
MIN_ENVELOPE_BINS = 150

#: Most bins any demand grid may build: 2 M bins is 19 years of 5-minute bins or 23 days of
#: 1-second bins; beyond it a coarser bin is asked for instead of allocating without bound.
MAX_GRID_BINS = 2_000_000


def envelope_bin_choices(choices: list[str], span_s: float) -> list[str]:
    """The intra-day bins of ``choices`` that give an envelope enough bins over ``span_s``.

    >>> envelope_bin_choices(["10s", "30s", "1min", "5min", "1h", "1d"], 3540)
    ['10s']
    >>> envelope_bin_choices(["1min", "5min", "15min", "1h", "1d"], 7 * 86400)
    ['1min', '5min', '15min', '1h']
    """
    return [c for c in choices if BIN_CHOICES_S[c] < 86400
            and span_s / BIN_CHOICES_S[c] >= MIN_ENVELOPE_BINS]


def bin_choices(resolution_s: float, span_s: float, pre_binned: bool) -> list[str]:
    """Bin labels a dataset supports: not finer than its data, a multiple of a pre-binned
    series' bin, and at most ``MAX_PAGE_BINS`` bins over its span.

    >>> bin_choices(1e-6, 3600, False)
    ['10s', '30s', '1min', '5min', '15min', '1h', '1d']
    >>> bin_choices(60, 7 * 86400, True)
    ['1min', '5min', '15min', '1h', '1d']
    """
    out = []
    for label, v in BIN_CHOICES_S.items():
        if v < resolution_s or (pre_binned and v % resolution_s):
            continue
        if span_s / v > MAX_PAGE_BINS and v < 300:
            continue
        out.append(label)
    return out


def env_number(name: str, default: float) -> float:
    """The number in environment variable ``name`` (a limit the operator sets), or ``default``
    when it is unset or empty.

    Raises
    ------
    ValueError
        The value is not a finite number >= 0; the message names the variable.
    """
    import math

    text = os.environ.get(name, "").strip()
    if not text:
        return float(default)
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"${name} = {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"${name} = {text!r} must be a finite number >= 0")
    return value


def not_a_file(path: str | Path) -> str | None:
    """Why ``path`` cannot be read as an input file, or None when it is a regular file:
    ``"no such file"``, ``"is a directory, not a file"``, ``"is a FIFO (named pipe), not a
    file: ..."``, a socket, a device, or the operating system's reason (permission denied)."""
    import stat

    try:
        mode = Path(path).stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot be read: {exc.strerror}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if stat.S_ISFIFO(mode):
        return ("is a FIFO (named pipe), not a file: headroom reads a file more than once; copy "
                "the stream to a file first")
    if stat.S_ISSOCK(mode):
        return "is a socket, not a file"
    return "is a device, not a file"


#: Longest bin accepted, in seconds (a year): every stored trace fits in one such bin, and a
#: longer one is past the interval range the store's SQL can express.
MAX_BIN_S = 366 * 86400


def parse_bin(spec: str | int) -> int:
    """Turn ``"5min"``, ``"1h"``, ``"300s"``, ``"1d"`` or an int of seconds into seconds.

    Raises
    ------
    ValueError
        If the spec is not understood, not positive, or longer than :data:`MAX_BIN_S` (a year).

    >>> parse_bin("5min"), parse_bin("1h"), parse_bin(90), parse_bin("30s")
    (300, 3600, 90, 30)
    """
    if isinstance(spec, int):
        seconds = spec
    else:
        s = spec.strip().lower()
        units = (("min", 60), ("h", 3600), ("d", 86400), ("s", 1))
        for suffix, mult in units:
            if s.endswith(suffix) and s[: -len(suffix)].strip().replace(".", "", 1).isdigit():
                seconds = int(round(float(s[: -len(suffix)]) * mult))
                break
        else:
            if s.isdigit():
                seconds = int(s)
            else:
                raise ValueError(f"bin {spec!r} is not understood; use e.g. 5min, 1h, 300s")
    if seconds <= 0:
        raise ValueError(f"bin {spec!r} must be positive")
    if seconds > MAX_BIN_S:
        raise ValueError(f"bin {spec!r} is longer than a year ({MAX_BIN_S:,} s); use e.g. 1d")
    return seconds


# The capacity / dispatch view of THE GPU catalog (analytics.hardware.catalog), re-exported here
# because pages may import config but not the analytics packages. GPUKind is the catalog record.
GPUKind = GpuSpec
GPU_CATALOG: tuple[GpuSpec, ...] = CAPACITY_KINDS
