"""Registry of official public datasets and ``headroom pull``.

Each entry names the upstream file (pinned to a commit where the host allows it), its licence, the
work to cite and, where the publisher gives one, the sha256 of its bytes: computed on copies
staged from the pinned upstream commits, or taken from the Git LFS pointer the repository commits
(``oid sha256:...`` is the hash of the object the LFS media URL serves). Entries without one
(a release asset with no LFS copy, blob-hosted files) are **hashed on first download and the
hash recorded** in ``<dest>/.headroom-sha256.json``; every later download of that file must match
it (trust on first use). Only ``https`` URLs are accepted, including ``--url`` mirrors, unless
``allow_insecure`` (CLI ``--insecure-url``) says otherwise.

Downloads stream to ``<dest>/<file>.part`` in 1 MiB chunks with a progress bar, check the hash,
then rename into place. A download stops, and its part file is deleted, as soon as it passes the
size it should have: the registry's ``size_bytes``, else the server's ``Content-Length``, else
:func:`max_pull_bytes` (an endless body once wrote 777 MB for a 320 KB file). A redirect from
``https`` to anything else is refused unless ``allow_insecure`` (a downgraded download was once
recorded as trusted). A part file is resumed (HTTP Range; a server that ignores Range restarts
the file) only when the file's hash is known, and a resumed file whose hash does not match is
downloaded once more from its first byte: bytes of unknown origin in a part file are never
recorded as the first download's hash.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from analytics.ingest.digest import file_sha256, update_from_file


@dataclass(frozen=True)
class Source:
    """One downloadable file.

    Attributes
    ----------
    name : registry key, used by ``headroom pull NAME``
    url : official download address
    filename : name to save under
    licence : licence of the data
    citation : work to cite
    sha256 : expected hash of the bytes, or None when unknown
    size_bytes : expected size, or None
    """

    name: str
    url: str
    filename: str
    licence: str
    citation: str
    sha256: str | None = None
    size_bytes: int | None = None


_BURST = "https://github.com/HPMLL/BurstGPT/releases/download/v1.2/"
#: BurstGPT files committed as Git LFS objects (HPMLL/BurstGPT @ 5d93d82): the media URL serves
#: the object whose sha256 the pointer names
_BURST_LFS = ("https://media.githubusercontent.com/media/HPMLL/BurstGPT/"
              "5d93d820d9b6bee4e26914df003e5713538164ae/data/")
_BURST_LFS_FILES = {
    "burstgpt1": ("BurstGPT_1.csv",
                  "4bb3783693d0a435686fbfc885615d2349bd067239079fa4b749f2e679e12122", 52283111),
    "burstgpt1_without_fails": (
        "BurstGPT_without_fails_1.csv",
        "a4d068a7113ec0290e74063a1b3447dc6001a30e4298eb313581b71006dda1f4", 51429517),
    "burstgpt2": ("BurstGPT_2.csv",
                  "44bf5942b03fca42c01a226a545ad3a750ec62688faecd67b6831c56a8928bf7", 144819209),
}
_BURST_CITE = ("Wang et al., BurstGPT: A Real-World Workload Dataset to Optimize LLM Serving "
               "Systems, KDD 2025")
_AZ23 = ("https://raw.githubusercontent.com/Azure/AzurePublicDataset/"
         "b469a113cedca53ddc3bdea71a143dc4b7d8700c/data/")
_AZ23_CITE = "Patel et al., Splitwise: Efficient Generative LLM Inference Using Phase Splitting, ISCA 2024"
_AZ24 = "https://azurepublicdatasettraces.blob.core.windows.net/azurellminfererencetrace/"
_AZ24_CITE = ("Stojkovic et al., DynamoLLM: Designing LLM Inference Clusters for Performance and "
              "Energy Efficiency, HPCA 2025")
_DCRL = ("https://raw.githubusercontent.com/HewlettPackard/dc-rl/"
         "a92b4755aca560e34a98d14028dda629eb968482/data/CarbonIntensity/")
_DCRL_CITE = ("Naug et al., SustainDC: Benchmarking for Sustainable Data Center Control, "
              "NeurIPS 2024 D&B (carbon from U.S. EIA EBA, public domain)")
_GDCC = ("https://raw.githubusercontent.com/HewlettPackard/green-dcc/"
         "3f6ea95cb835b89ba50b0ef76d66d14b8037643e/data/carbon_intensity/")
_GDCC_CITE = "HewlettPackard green-dcc (carbon intensity from Electricity Maps)"

_MLE3 = ("https://raw.githubusercontent.com/ml-energy/leaderboard/"
         "0cd52dab897c5d91a45f4d413038f3b8b4251b0f/public/data/tasks/")
_MLE3_CITE = "Chung et al., The ML.ENERGY Benchmark, NeurIPS 2025 D&B"
_MLE3_TASKS = {
    "gpqa": ("792582efd1473e9cbc41200deac4d420a106c9207c68928cc7e712e3b55132dc", 161530),
    "sourcegraph-fim": ("e74db077b9cdff916d9a60f482dc5cc1d0be220fc701c7ce0d6408c6c6cf7034",
                        43583),
}
_ARGONNE = ("https://raw.githubusercontent.com/argonne-lcf/LLM-Inference-Bench/"
            "4211f5d4e9bc0145ed541b6d372d5d8223b44235/Plots/")
_ARGONNE_CITE = ("Chitty-Venkata et al., LLM-Inference-Bench: Inference Benchmarking of Large "
                 "Language Models on AI Accelerators, SC'24 workshops (arXiv:2411.00136)")
_ARGONNE_FILES = {
    "all_results": ("All_results.csv",
                    "631a12e08c786ce2d4bdfdc0f67b93234360682cb4b36c93806270ddcfd58412", 421976),
    "power": ("Fig_16_a_b/power_results.csv",
              "0b2ee7555fd76f00b6390d515d20e376077cc5abd4bce56ebc224d18be56adac", 5702),
    "ttft_itl": ("Fig_22/all_results_TTFT_ITL.csv",
                 "97b406122a3015ecadfb8c96b57edcc3f31186f70ffbf3eddf100b51c02b452d", 3029),
}
_SUSTAINDC = {
    "AZPS": ("e05789a1dbf940e0554b0e8db42d84ed5cc0279d0050206fb048ba832ef24ef4", 601730),
    "BPAT": ("ea4b1f6ea07c623958077590de68c42a693c12cb608e9e802ab70a055e59beaf", 636031),
    "CISO": ("0e6d562d4105e16e652cb48c8eb818a3110d063aca8cfa8a68fa24209db3aac4", 811411),
    "ERCO": ("886432b2b988d9f4e280ee147dc45e095f6a4fffa30960a1254d4ee113bf2255", 682127),
    "MISO": ("9f4a155433568fa1c014a5aefc8834556f5054d71d401b5c9cfba9211fef41ee", 856891),
    "NYIS": ("fe64c68f40bc9caffcdb5eb760614f2cda984aa99e6d95328fb18847cce869b8", 659008),
    "PJM": ("371fcbccb6b7d768df41bffd4496d58295a86e6821daf9528f013931a047d21d", 872193),
    "SOCO": ("90654744766469a90b85d971c56e921bc5013ab597c44d87bc7f6eaa6f899e72", 667088),
    "WAAT": ("8ea49f028e5272bc9e3181035c363df2fd797a2cf20593f7e731f9293b40ba13", 739805),
}
_GREENDCC = {
    "GB": ("1a4c844668f63b9d56639be7626062cf29f35e467d289d9b54f218c73000b999", 1043431),
    "DE-LU": ("b6040328169313ca91b28806f3d69191cb6c035f45a7bcdd338a7c090d914dcb", 725139),
    "US-CAL-CISO": ("44bafab775c6b0d4762b1dc971eb293cfea154f80799a5230f9268d32e1ad55b", 749471),
    "US-TEX-ERCO": ("e98066048a85422d39c877ffd281d1612d698b40e2c355a00ed0a49acaba2954", 1012586),
    "SG": ("d668136330b50887e9736d194586b984b71f32c3192382b7df65739a37839de3", 879840),
}

REGISTRY: dict[str, Source] = {
    s.name: s
    for s in [
        *[Source(key, _BURST_LFS + fname, fname, "CC BY 4.0", _BURST_CITE, sha, size)
          for key, (fname, sha, size) in _BURST_LFS_FILES.items()],
        Source("burstgpt3", _BURST + "BurstGPT_3.csv", "BurstGPT_3.csv", "CC BY 4.0", _BURST_CITE),
        Source("azure2023_code", _AZ23 + "AzureLLMInferenceTrace_code.csv",
               "AzureLLMInferenceTrace_code.csv", "CC BY 4.0", _AZ23_CITE,
               "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6", 320117),
        Source("azure2023_conv", _AZ23 + "AzureLLMInferenceTrace_conv.csv",
               "AzureLLMInferenceTrace_conv.csv", "CC BY 4.0", _AZ23_CITE,
               "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8", 719188),
        Source("azure2024_code", _AZ24 + "AzureLLMInferenceTrace_code_1week.csv",
               "AzureLLMInferenceTrace_code_1week.csv", "CC BY 4.0", _AZ24_CITE),
        Source("azure2024_conv", _AZ24 + "AzureLLMInferenceTrace_conv_1week.csv",
               "AzureLLMInferenceTrace_conv_1week.csv", "CC BY 4.0", _AZ24_CITE),
        Source("mooncake_conversation",
               "https://raw.githubusercontent.com/kvcache-ai/Mooncake/"
               "3b5a594133958449a1feaf1c9e0fc1b553e34a28/FAST25-release/traces/"
               "conversation_trace.jsonl",
               "conversation_trace.jsonl", "Apache-2.0",
               "Qin et al., Mooncake: A KVCache-centric Disaggregated Architecture for LLM "
               "Serving, FAST 2025",
               "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df", 3029533),
        *[
            Source(f"sustaindc_carbon_{ba.lower()}", _DCRL + f"{ba}_NG_%26_avgCI.csv",
                   f"{ba}_NG_&_avgCI.csv", "MIT (code); EIA data public domain", _DCRL_CITE,
                   sha, size)
            for ba, (sha, size) in _SUSTAINDC.items()
        ],
        *[
            Source(f"greendcc_carbon_{z.lower()}_2023", _GDCC + f"{z}/2023/{z}_2023_hourly.csv",
                   f"{z}_2023_hourly.csv", "MIT (code); Electricity Maps data terms apply",
                   _GDCC_CITE, sha, size)
            for z, (sha, size) in _GREENDCC.items()
        ],
        Source("mlenergy_v3_lm_arena_chat",
               "https://raw.githubusercontent.com/ml-energy/leaderboard/"
               "0cd52dab897c5d91a45f4d413038f3b8b4251b0f/public/data/tasks/lm-arena-chat.json",
               "mlenergy_v3_lm-arena-chat.json", "Apache-2.0",
               "Chung et al., The ML.ENERGY Benchmark, NeurIPS 2025 D&B",
               "24e25d46cdd6a9d9d58f8de63928d6f42601f9966d22e4d7a478e5f11f89a7ec", 286127),
        *[Source(f"mlenergy_v3_{task.replace('-', '_')}", _MLE3 + f"{task}.json",
                 f"mlenergy_v3_{task}.json", "Apache-2.0", _MLE3_CITE, sha, size)
          for task, (sha, size) in _MLE3_TASKS.items()],
        *[Source(f"argonne_{key}", _ARGONNE + path, path.replace("/", "__"), "BSD-3-Clause",
                 _ARGONNE_CITE, sha, size)
          for key, (path, sha, size) in _ARGONNE_FILES.items()],
    ]
}


class PullError(RuntimeError):
    """Download failed (network, HTTP status), the URL is not https (or redirects away from
    https), the body is longer or shorter than the file should be, the destination cannot be
    written, or the bytes do not match the registry hash (or the hash recorded on the first
    download). ``public``: the message without this machine's paths (for a browser user)."""

    def __init__(self, message: str, public: str | None = None):
        super().__init__(message)
        self.public = public or message


class PullRefused(PullError, ValueError):
    """The pull as asked cannot be done (a URL that is not https, a destination that is a
    file): bad input, exit 2 in the CLI."""


def max_pull_bytes() -> int:
    """Most bytes a download of unknown size may write: ``$HEADROOM_PULL_MAX_MB`` (default
    20,000 MB; the largest public trace the registry names is a few GB)."""
    from analytics.config import env_number

    return int(env_number("HEADROOM_PULL_MAX_MB", 20_000) * 1_000_000)


#: Hashes recorded on the first download of entries the registry has no hash for (per folder).
RECORDED = ".headroom-sha256.json"


def _recorded(dest: Path) -> dict[str, str]:
    try:
        found = json.loads((dest / RECORDED).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in found.items() if isinstance(v, str)} if isinstance(found, dict) \
        else {}


def _record(dest: Path, filename: str, digest: str) -> None:
    hashes = {**_recorded(dest), filename: digest}
    tmp = dest / (RECORDED + ".tmp")
    tmp.write_text(json.dumps(hashes, indent=1, sort_keys=True))
    tmp.replace(dest / RECORDED)


def expected_sha256(src: Source, dest: Path) -> tuple[str | None, str]:
    """The hash a download of ``src`` into ``dest`` must have, and where it comes from:
    ``"pinned"`` (the registry), ``"recorded"`` (the first download), or ``(None, "first")``."""
    if src.sha256:
        return src.sha256, "pinned"
    got = _recorded(dest).get(src.filename)
    return (got, "recorded") if got else (None, "first")


def pull(
    name: str,
    dest: str | Path,
    url: str | None = None,
    *,
    progress: bool = True,
    on_progress: Callable[[int, int | None], None] | None = None,
    chunk_bytes: int = 1 << 20,
    timeout_s: float = 60.0,
    allow_insecure: bool = False,
) -> dict:
    """Download a registry file into ``dest`` (resumable, checksum-checked).

    Parameters
    ----------
    name : registry key (see ``REGISTRY``)
    dest : folder to save into (created if missing)
    url : override the registry URL (a mirror); the registry hash is still checked
    progress : draw a tqdm bar on stderr
    on_progress : callback ``(bytes_done, bytes_total_or_None)`` for UIs
    allow_insecure : accept a non-https ``url`` (``http://`` or ``file://`` mirrors, tests)

    Returns
    -------
    ``{"name", "path", "sha256", "bytes", "verified", "checksum"}``: ``checksum`` says how the
    bytes were checked (``pinned``: the registry hash; ``recorded``: the hash recorded on the
    first download; ``first``: no hash known, this download's hash is now recorded);
    ``verified`` is True for the first two.

    Raises
    ------
    KeyError : unknown name
    PullError : a URL that is not https (without ``allow_insecure``), network or HTTP failure
        (the partial file is kept for a resume), or a hash mismatch (the bad file is deleted)
    """
    # urllib.request (http.client, ssl, email: ~50 ms) only for a download, not for the CLI's
    # parser, which lists the registry's names (issue 15)
    import urllib.parse

    if name not in REGISTRY:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(REGISTRY)}")
    src = REGISTRY[name]
    source_url = url or src.url
    if not allow_insecure and urllib.parse.urlsplit(source_url).scheme != "https":
        raise PullRefused(f"{name}: {source_url} is not an https URL; only https is accepted "
                          "(pass --insecure-url to pull from a trusted http or file mirror)")
    dest = Path(dest)
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PullRefused(f"{name}: cannot use {dest} as the folder to save into: "
                          f"{exc.strerror}", f"{name}: the data folder cannot be written") \
            from exc
    final = dest / src.filename
    if final.exists() and not final.is_file():
        raise PullRefused(f"{name}: {final} exists and is not a file; move it away",
                          f"{name}: the file's place in the data folder is taken")
    want, how = expected_sha256(src, dest)
    if final.exists() and want and file_sha256(final) == want:
        return _result(src, final, want, how)
    part = final.with_name(final.name + ".part")
    if want is None:  # nothing to check a part file against: its bytes are not trusted
        part.unlink(missing_ok=True)
    fetch = functools.partial(_download, src, source_url, part, chunk_bytes=chunk_bytes,
                              timeout_s=timeout_s, allow_insecure=allow_insecure,
                              progress=progress, on_progress=on_progress)
    resumed, digest = fetch()
    if want and digest != want and resumed:  # the bytes kept from before may be the bad ones
        part.unlink(missing_ok=True)
        resumed, digest = fetch()
    if want and digest != want:
        part.unlink(missing_ok=True)
        whose = "registry's" if how == "pinned" else f"first download's (in {dest / RECORDED})"
        raise PullError(f"{name}: sha256 {digest} does not match the {whose} {want}; "
                        "file deleted", f"{name}: the downloaded bytes do not match the "
                        f"{'registry' if how == 'pinned' else 'first download'}'s sha256; "
                        "file deleted")
    part.replace(final)
    if how == "first":
        _record(dest, src.filename, digest)
    return _result(src, final, digest, how)


def _opener(allow_insecure: bool):
    """A urllib opener whose redirects never leave https (unless ``allow_insecure``)."""
    import urllib.parse
    import urllib.request

    class NoDowngrade(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            old, new = (urllib.parse.urlsplit(u).scheme for u in (req.full_url, newurl))
            if old == "https" and new != "https" and not allow_insecure:
                raise PullError(f"{req.full_url} redirects to {newurl}, away from https: "
                                "refused (pass --insecure-url to accept it)")
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    return urllib.request.build_opener(NoDowngrade)


def _download(src: Source, source_url: str, part: Path, *, chunk_bytes: int, timeout_s: float,
              allow_insecure: bool, progress: bool, on_progress) -> tuple[bool, str]:
    """Fetch ``source_url`` into ``part`` (appending to the bytes there with a Range request);
    returns ``(resumed, sha256 of the whole part file)``. Raises PullError (the part file kept
    for a resume after a network failure; deleted when the body passes the expected size)."""
    import urllib.error
    import urllib.request

    name = src.name
    done = part.stat().st_size if part.exists() else 0
    if src.size_bytes is not None and done > src.size_bytes:  # longer than the file: junk
        part.unlink()
        done = 0
    hasher = hashlib.sha256()
    if done:  # resume: the hash covers the bytes already there
        update_from_file(hasher, part, chunk_bytes)
    request = urllib.request.Request(source_url, headers={"User-Agent": "headroom"})
    if done:
        request.add_header("Range", f"bytes={done}-")
    resumed, declared = bool(done), None
    try:
        with _opener(allow_insecure).open(request, timeout=timeout_s) as resp:
            if done and resp.status != 206:  # server ignored Range: start over
                done, hasher, resumed = 0, hashlib.sha256(), False
            length = resp.headers.get("Content-Length")
            declared = done + int(length) if length is not None and length.isdigit() else None
            total = src.size_bytes or declared
            cap = src.size_bytes or min(declared or max_pull_bytes(), max_pull_bytes())
            mode = "ab" if done else "wb"
            from tqdm import tqdm  # only when a bar is drawn

            bar = tqdm(total=total, initial=done, unit="B", unit_scale=True, desc=name,
                       file=sys.stderr, disable=not progress)
            with open(part, mode) as out, bar:
                while block := resp.read(chunk_bytes):
                    done += len(block)
                    if done > cap:
                        raise _TooLong(cap)
                    out.write(block)
                    hasher.update(block)
                    bar.update(len(block))
                    if on_progress:
                        on_progress(done, total)
    except _TooLong as exc:
        part.unlink(missing_ok=True)
        raise PullError(f"{name}: {source_url} sent more than the {exc.cap:,} bytes the file "
                        "should have; stopped there and deleted what it sent") from None
    except urllib.error.HTTPError as exc:
        if not (exc.code == 416 and done):  # 416 with a part file: it is already complete
            raise PullError(f"{name}: HTTP {exc.code} from {source_url}") from exc
    except (urllib.error.URLError, OSError) as exc:
        kept = part.stat().st_size if part.exists() else 0
        raise PullError(
            f"{name}: download from {source_url} failed ({exc}); "
            f"{kept:,} bytes kept in {part} - run the same pull again to resume",
            f"{name}: the download failed ({type(exc).__name__}); {kept:,} bytes are kept: "
            "pull again to resume") from exc
    if declared is not None and done < declared:  # http.client returns a short read silently
        raise PullError(f"{name}: {source_url} ended after {done:,} of the {declared:,} bytes "
                        f"it announced; they are kept in {part} - run the same pull again to "
                        "resume", f"{name}: the download ended after {done:,} of {declared:,} "
                        "bytes; pull again to resume")
    return resumed, hasher.hexdigest()


class _TooLong(Exception):
    def __init__(self, cap: int):
        self.cap = cap


def _result(src: Source, path: Path, digest: str, how: str) -> dict:
    return {"name": src.name, "path": str(path), "sha256": digest,
            "bytes": path.stat().st_size, "verified": how != "first", "checksum": how}
