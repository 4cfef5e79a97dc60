"""Models from the Hugging Face hub: a repository's config, safetensors weights and tokenizer
downloaded (never pickles, never code), after asking the hub how large they are: a download past
$EXPLORER_MAX_DOWNLOAD_GB (default 5 GB) is refused before a byte is fetched. Every failure (gated,
unknown, offline) is one `CheckpointError` that says what to do."""

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

    _refuse_if_too_big(repo_id)
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
    value = os.environ.get(MAX_DOWNLOAD_GB_VARIABLE, "")
    try:
        return float(value or DEFAULT_MAX_DOWNLOAD_GB) * 1e9
    except ValueError:
        raise CheckpointError(f"{MAX_DOWNLOAD_GB_VARIABLE}={value!r} is not a number of GB.") from None


def _refuse_if_too_big(repo_id: str) -> None:
    """Ask the hub how large the files to download are, and refuse before downloading anything when
    they pass the limit: a 70B model typed into the box must not fill the disk and memory of the
    machine serving everyone. When the hub cannot be asked (offline, say) the download itself decides:
    it serves the local cache or fails with its own clear error."""
    from huggingface_hub import HfApi

    try:
        info = HfApi().model_info(repo_id, files_metadata=True, timeout=10)
    except Exception:  # unreachable, unknown or gated: snapshot_download raises the error to show
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
