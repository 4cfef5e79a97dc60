"""The models already on this machine, found without loading one: the Hugging Face cache, Ollama's store
and LM Studio's folder, read from configs, manifests and the first bytes of GGUF files alone.

    explorer.local_models()  ->  [("HuggingFaceTB/SmolLM2-135M (HF cache)", ".../snapshots/<rev>"),
                                  ("qwen3:0.6b (Ollama)", "~/.ollama/models/blobs/sha256-…"), …]

Each source is what `explorer.load` takes: a snapshot folder, or a GGUF file (an Ollama blob has no
.gguf suffix; `checkpoints.resolve` knows it by its magic bytes). Only the architectures the loaders
read are listed: a config.json's `model_type` in `SUPPORTED_MODEL_TYPES`, a GGUF's
`general.architecture` in `gguf.ARCHITECTURES`.

A scan reads at most MAX_ENTRIES directory entries in about MAX_SECONDS, and never follows a symlink out
of the folder it scans (the HF cache's snapshot files link into its own blobs/, inside it; a place's
folder that is itself a link, as ~/.ollama/models may be, is scanned where it leads); a scan cut short
keeps what it found and says where it stopped (`LocalScan.note`). Whatever one entry holds (a link
loop, JSON nested past Python's recursion limit, a file that vanishes midway), it costs that entry alone:
the entry is skipped and named in the note, and the scan goes on.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from explorer.engine.config import SUPPORTED_MODEL_TYPES, brief
from explorer.loading.gguf import ARCHITECTURES
from explorer.loading.gguf_header import read_architecture

log = logging.getLogger(__name__)

MAX_ENTRIES = 1000  # directory entries read by one scan, in all its places
MAX_SECONDS = 2.0
PLACES = ("HF cache", "Ollama", "LM Studio")  # the order choices are listed in
MAX_JSON_BYTES = 1 << 20  # a config.json or an Ollama manifest larger than this is not read
HF_REVISION = re.compile(r"[0-9a-f]{40}")
OLLAMA_MODEL = "application/vnd.ollama.image.model"
OLLAMA_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
OLLAMA_REGISTRY = "registry.ollama.ai"
# Ollama's Linux service runs as the user `ollama`, whose home is here (its install script): the models it
# pulls are in this store, not in the person's own ~/.ollama
OLLAMA_SERVICE_STORE = Path("/usr/share/ollama/.ollama/models")
GGUF_SHARD = re.compile(r"-\d{5}-of-\d{5}\.gguf$")  # one part of a split file, which no loader here reads
NAMED_SKIPS = 3  # entries a note names; the rest are counted


@dataclass(frozen=True)
class LocalScan:
    """What one scan found, as the picker lists it, and why it stopped short ('' if it looked everywhere)."""

    choices: tuple[tuple[str, str], ...]  # (label, source), by place, then name
    note: str = ""


def local_models() -> list[tuple[str, str]]:
    """(label, source) of every supported model in the Hugging Face cache, Ollama's store and LM Studio's
    folder, by place, then name: "org/name (HF cache)", "qwen3:0.6b (Ollama)",
    "publisher/repo/file.gguf (LM Studio)". Reads headers and configs, never weights; bounded as `scan`."""
    return list(scan().choices)


def places(environ: Mapping[str, str] = os.environ) -> list[tuple[str, Path]]:
    """Where each place keeps its models on this machine, as its own tools find them (HF_HUB_CACHE or
    HF_HOME; OLLAMA_MODELS, else the person's store and the Linux service's; LM Studio's folder and its
    older one)."""
    home = Path(environ.get("HOME") or Path.home())
    hub = environ.get("HF_HUB_CACHE") or environ.get("HUGGINGFACE_HUB_CACHE")
    hf_home = environ.get("HF_HOME") or Path(environ.get("XDG_CACHE_HOME") or home / ".cache") / "huggingface"
    ollama = environ.get("OLLAMA_MODELS")
    stores = [Path(ollama)] if ollama else [home / ".ollama" / "models", OLLAMA_SERVICE_STORE]
    return [
        ("HF cache", Path(hub) if hub else Path(hf_home) / "hub"),
        *(("Ollama", store) for store in stores),
        ("LM Studio", home / ".lmstudio" / "models"),
        ("LM Studio", home / ".cache" / "lm-studio" / "models"),
    ]


def scan(
    environ: Mapping[str, str] = os.environ,
    max_entries: int = MAX_ENTRIES,
    max_seconds: float = MAX_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> LocalScan:
    """Every supported model in `places(environ)`, within `max_entries` directory entries and
    `max_seconds` (read on `clock`) for all of them together."""
    scanner = _Scanner(max_entries, clock() + max_seconds, clock)
    note, seen = "", set()
    try:
        for place, root in places(environ):
            real = os.path.realpath(root.expanduser())
            if real in seen or not os.path.isdir(real):
                continue
            seen.add(real)
            try:
                scanner.place(place, root.expanduser(), real)
            except OSError as error:  # a folder changed or closed to us midway: what was found is kept
                log.info("looking for models in %s: %s", root, error)
    except _Stop as stop:
        bound = f"{max_entries:,} entries" if stop.reason == "entries" else f"{max_seconds:g} s"
        note = (
            f"The search for models on this machine stopped after {bound}, in {stop.folder}: "
            f"the models found before it are listed ({len(scanner.found)}); type the path of any other."
        )
        log.warning(note)
    if scanner.skipped:
        note = " ".join(filter(None, (note, skipped_note(scanner.skipped))))
        log.warning("looking for models on this machine: %s", skipped_note(scanner.skipped))
    found = sorted(scanner.found, key=lambda f: (PLACES.index(f[0]), f[1].lower(), f[1]))
    return LocalScan(tuple((f"{name} ({place})", source) for place, name, source in found), note)


def skipped_note(skipped: list[tuple[str, str]]) -> str:
    """What the note says of the entries skipped: the first few by path and reason, the rest counted."""
    named = "; ".join(f"{path} ({reason})" for path, reason in skipped[:NAMED_SKIPS])
    more = f"; and {len(skipped) - NAMED_SKIPS:,} more" if len(skipped) > NAMED_SKIPS else ""
    entries = "entry" if len(skipped) == 1 else "entries"
    return f"Skipped {len(skipped):,} {entries} it could not read: {named}{more}."


def reason(error: BaseException) -> str:
    """Why an entry was skipped, in a few words."""
    if isinstance(error, RecursionError):
        return "JSON nested too deep"
    if isinstance(error, OSError) and error.errno == errno.ELOOP:
        return "a link loop"
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return brief(str(error) or type(error).__name__, 60)


class _Stop(Exception):
    def __init__(self, reason: str, folder: Path):
        super().__init__(reason)
        self.reason, self.folder = reason, folder


def inside(path: str | Path, real_root: str) -> bool:
    """Whether `path`, every link in it followed, lies in the folder whose real path is `real_root`."""
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


@dataclass
class _Scanner:
    max_entries: int
    deadline: float
    clock: Callable[[], float]
    entries: int = 0
    found: list[tuple[str, str, str]] = field(default_factory=list)  # (place, name, source)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)

    @contextmanager
    def each(self, path: str | Path) -> Iterator[None]:
        """One entry's work: whatever it raises (but a bound of the scan's) skips it alone, named."""
        try:
            yield
        except _Stop:
            raise
        except Exception as error:
            self.skipped.append((str(path), reason(error)))

    def listing(self, folder: Path, real_root: str) -> Iterator[os.DirEntry]:
        """The entries of `folder` as they are read, each counted against the scan's bounds (so what
        was found before a bound is kept); a link leading out of the place's folder left out, a link
        that loops or leads nowhere skipped (named), and an unreadable folder empty."""
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    self.entries += 1
                    if self.entries > self.max_entries:
                        raise _Stop("entries", folder)
                    if self.clock() > self.deadline:
                        raise _Stop("seconds", folder)
                    if entry.is_symlink() and not (inside(entry.path, real_root) and self.resolves(entry)):
                        continue
                    yield entry
        except OSError:
            return

    def resolves(self, link: os.DirEntry) -> bool:
        """Whether a link leads to something: a link to nothing is left out, as a missing file; a loop
        is skipped and named."""
        with self.each(link.path):
            try:
                link.stat()
            except FileNotFoundError:
                return False
            return True
        return False

    def files(self, folder: Path, real_root: str, depth: int, parts=()) -> Iterator[tuple[Path, tuple]]:
        """Every file `depth` folders below `folder` (1: its own files), with the names on the way."""
        for entry in self.listing(folder, real_root):
            if depth == 1 and entry.is_file():
                yield Path(entry.path), (*parts, entry.name)
            elif depth > 1 and entry.is_dir():
                yield from self.files(Path(entry.path), real_root, depth - 1, (*parts, entry.name))

    # --- the three places ---

    def place(self, place: str, root: Path, real_root: str) -> None:
        scanners = {"HF cache": self.hf_cache, "Ollama": self.ollama, "LM Studio": self.lm_studio}
        scanners[place](root, real_root)

    def hf_cache(self, root: Path, real_root: str) -> None:
        """models--org--name/snapshots/<rev>/ holding a supported config.json, tokenizer.json and
        safetensors weights: the revision refs/main names, else the newest snapshot."""
        for repo in self.listing(root, real_root):
            if repo.name.startswith("models--") and repo.is_dir():
                with self.each(repo.path):
                    snapshot = self._hf_snapshot(Path(repo.path), real_root)
                    if snapshot is not None and self._hf_supported(snapshot, real_root):
                        name = repo.name.removeprefix("models--").replace("--", "/")
                        self.found.append(("HF cache", name, str(snapshot)))

    def _hf_snapshot(self, repo: Path, real_root: str) -> Path | None:
        revision = _read(repo / "refs" / "main", real_root, 64).decode("ascii", "replace").strip()
        main = repo / "snapshots" / revision
        if HF_REVISION.fullmatch(revision) and main.is_dir() and inside(main, real_root):
            return main
        snapshots = [entry for entry in self.listing(repo / "snapshots", real_root) if entry.is_dir()]
        newest = max(snapshots, key=lambda entry: entry.stat().st_mtime, default=None)
        return Path(newest.path) if newest else None

    def _hf_supported(self, snapshot: Path, real_root: str) -> bool:
        files = {entry.name for entry in self.listing(snapshot, real_root) if entry.is_file()}
        weights = any(name.endswith(".safetensors") for name in files)
        if not (weights and {"config.json", "tokenizer.json"} <= files):
            return False
        config = _json(snapshot / "config.json", real_root)
        return isinstance(config, dict) and config.get("model_type") in SUPPORTED_MODEL_TYPES

    def ollama(self, root: Path, real_root: str) -> None:
        """manifests/<host>/<namespace>/<name>/<tag>, each naming its model layer's blob, a GGUF file."""
        for manifest, (host, namespace, name, tag) in self.files(root / "manifests", real_root, 4):
            with self.each(manifest):
                blob = _ollama_blob(manifest, root, real_root)
                if blob is not None and read_architecture(blob) in ARCHITECTURES:
                    self.found.append(("Ollama", ollama_name(host, namespace, name, tag), str(blob)))

    def lm_studio(self, root: Path, real_root: str) -> None:
        """<publisher>/<repo>/<file>.gguf (a vision projector's file has an architecture of its own)."""
        for file, parts in self.files(root, real_root, 3):
            whole = file.suffix.lower() == ".gguf" and not GGUF_SHARD.search(file.name)
            with self.each(file):
                if whole and read_architecture(file) in ARCHITECTURES:
                    self.found.append(("LM Studio", "/".join(parts), str(file)))


def ollama_name(host: str, namespace: str, name: str, tag: str) -> str:
    """The name `ollama list` gives: `qwen3:0.6b`, `user/model:tag`, `hf.co/org/repo:tag`."""
    if host != OLLAMA_REGISTRY:
        return f"{host}/{namespace}/{name}:{tag}"
    return f"{name}:{tag}" if namespace == "library" else f"{namespace}/{name}:{tag}"


def _ollama_blob(manifest: Path, root: Path, real_root: str) -> Path | None:
    """The blob of a manifest's model layer (`blobs/sha256-<hex>`), if it is a file inside the store."""
    content = _json(manifest, real_root)
    layers = content.get("layers") if isinstance(content, dict) else None
    for layer in layers if isinstance(layers, list) else []:
        if not isinstance(layer, dict) or layer.get("mediaType") != OLLAMA_MODEL:
            continue
        digest = layer.get("digest")
        if isinstance(digest, str) and OLLAMA_DIGEST.fullmatch(digest):
            blob = root / "blobs" / digest.replace(":", "-")
            return blob if blob.is_file() and inside(blob, real_root) else None
    return None


def _read(path: Path, real_root: str, limit: int) -> bytes:
    """At most `limit` bytes of a file inside the place's folder; b'' for any other, or none."""
    try:
        if not inside(path, real_root) or not path.is_file() or path.stat().st_size > limit:
            return b""
        return path.read_bytes()
    except OSError:
        return b""


def _json(path: Path, real_root: str) -> object:
    """A small JSON file inside the place's folder; None if it is missing, too big or not JSON (JSON
    nested past the recursion limit raises, for the entry to be skipped and named)."""
    try:
        return json.loads(_read(path, real_root, MAX_JSON_BYTES) or b"null")
    except ValueError:
        return None
