"""Models from the Hugging Face hub: a repository's config, safetensors weights and tokenizer
downloaded (never pickles, never code), after asking the hub how large they are: a download past
$EXPLORER_MAX_DOWNLOAD_GB (default 5 GB) is refused before a byte is fetched. Every failure (gated,
unknown, offline) is one `CheckpointError` that says what to do.

The hub finds a repository whatever the case of its id, but its cache keeps a folder per spelling: so
an id is downloaded under one spelling per model (`canonical`: the hub's own, or, when the hub cannot
be asked, the one already in the cache), and case variants share one download and one folder."""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

from explorer.errors import CheckpointError

HUB_FILES = ["config.json", "*.safetensors", "model.safetensors.index.json", "tokenizer.json"]
HUB_ID = re.compile(r"^[\w.\-]+/[\w.\-]+$")
MAX_DOWNLOAD_GB_VARIABLE = "EXPLORER_MAX_DOWNLOAD_GB"
DEFAULT_MAX_DOWNLOAD_GB = 5.0  # a ~1B-parameter model in float32, or ~2B in bfloat16


def download(repo_id: str) -> Path:
    """The local directory of a hub model's config, safetensors and tokenizer, downloaded (or found in the
    local cache) once its size is within the limit."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    info = _model_info(repo_id)
    repo_id = canonical(repo_id, info)
    _refuse_if_too_big(repo_id, info)
    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES))
    except GatedRepoError:
        raise CheckpointError(
            f"{repo_id} is gated on the Hugging Face hub: accept its licence there and log in "
            "(`hf auth login`), or download it and give the local directory."
        ) from None
    except (RepositoryNotFoundError, RevisionNotFoundError, HFValidationError):
        raise CheckpointError(f"No model {repo_id!r} on the Hugging Face hub.") from None
    except LocalEntryNotFoundError:
        raise CheckpointError(
            f"Could not download {repo_id!r}: the hub cannot be reached (offline?) and it is not in "
            "the local cache. Download it elsewhere and give the local directory."
        ) from None
    except Exception as error:  # network stacks raise many types; the person needs one message
        raise CheckpointError(f"Could not download {repo_id!r}: {error}") from None


def max_download_bytes() -> float:
    """The largest hub download allowed, from $EXPLORER_MAX_DOWNLOAD_GB (default 5 GB)."""
    return bytes_from_environment(MAX_DOWNLOAD_GB_VARIABLE, DEFAULT_MAX_DOWNLOAD_GB, "GB", 1e9)


def bytes_from_environment(variable: str, default: float, unit: str, unit_bytes: float) -> float:
    """A size in bytes read from $`variable`, given there in `unit`s of `unit_bytes` (`default` where
    unset); CheckpointError where it is no number."""
    value = os.environ.get(variable, "")
    try:
        return float(value or default) * unit_bytes
    except ValueError:
        raise CheckpointError(f"{variable}={value!r} is not a number of {unit}.") from None


def canonical(repo_id: str, info=None) -> str:
    """The spelling a hub id is downloaded under: the hub's (`info`, what it answered about the model),
    else the spelling of the model's folder in the hub cache, else `repo_id` as given."""
    if info is not None and isinstance(getattr(info, "id", None), str) and info.id.lower() == repo_id.lower():
        return info.id
    return _cached_spelling(repo_id) or repo_id


def _cached_spelling(repo_id: str) -> str | None:
    """The spelling of `repo_id` (any case) that the hub cache holds a folder of: `repo_id` itself when
    it does, else the first in order; None when it holds none."""
    from huggingface_hub import constants

    try:
        folders = sorted(entry.name for entry in os.scandir(constants.HF_HUB_CACHE) if entry.is_dir())
    except OSError:
        return None
    wanted = "models--" + repo_id.replace("/", "--")
    found = [name for name in folders if name.lower() == wanted.lower()]
    if not found:
        return None
    spelling = wanted if wanted in found else found[0]
    return spelling.removeprefix("models--").replace("--", "/", 1)


def _model_info(repo_id: str):
    """What the hub says of the model (its id as the hub spells it, its files and their sizes); None
    when it cannot be asked (unreachable, unknown or gated: the download raises the error to show)."""
    from huggingface_hub import HfApi

    try:
        return HfApi().model_info(repo_id, files_metadata=True, timeout=10)
    except Exception:
        return None


def _refuse_if_too_big(repo_id: str, info) -> None:
    """Refuse before downloading anything when the files to download (`info`, the hub's answer) pass
    the limit: a 70B model typed into the box must not fill the disk and memory of the machine
    serving everyone. When the hub could not be asked (offline, say) the download itself decides: it
    serves the local cache or fails with its own clear error."""
    if info is None:
        return
    wanted = [
        sibling
        for sibling in info.siblings or []
        if any(fnmatch.fnmatch(sibling.rfilename, pattern) for pattern in HUB_FILES)
    ]
    total = sum(sibling.size or 0 for sibling in wanted)
    limit = max_download_bytes()
    if total > limit:
        raise CheckpointError(
            f"{repo_id} is {total / 1e9:.1f} GB to download, above this app's limit of {limit / 1e9:g} GB "
            f"({MAX_DOWNLOAD_GB_VARIABLE}). Pick a smaller model, or raise the limit on a machine with the "
            "memory for it (weights are loaded in float32)."
        )
