"""Load a checkpoint: the bundled model, a Hugging Face-layout directory, or a hub id.

Weights come from safetensors only (a single file or shards behind `model.safetensors.index.json`);
pickled weights are refused, never unpickled, and no remote code is ever run. Every way loading can
fail ends in one `CheckpointError` whose message says what to do.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from explorer.config import ModelConfig, UnsupportedConfigError
from explorer.model import Transformer
from explorer.rope import config_inverse_frequencies

ASSETS = Path(__file__).resolve().parent.parent / "assets"
BUNDLED_MODEL = ASSETS / "shakespeare-gqa"
HUB_FILES = ["config.json", "*.safetensors", "model.safetensors.index.json", "tokenizer.json"]
PICKLED_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
HUB_ID = re.compile(r"^[\w.\-]+/[\w.\-]+$")
MAX_DOWNLOAD_GB_VARIABLE = "EXPLORER_MAX_DOWNLOAD_GB"
DEFAULT_MAX_DOWNLOAD_GB = 5.0  # a ~1B-parameter model in float32, or ~2B in bfloat16


class CheckpointError(RuntimeError):
    """A checkpoint could not be loaded; the message is meant for the person who asked for it."""


@dataclass
class Checkpoint:
    name: str  # what the person asked for, for display
    path: Path
    config: ModelConfig
    model: Transformer
    tokenizer: Tokenizer


def resolve(source: str | Path | None) -> Path:
    """A local directory for `source`: the bundled model, an existing directory, or a hub download."""
    if source is None or str(source).strip() == "":
        if not BUNDLED_MODEL.is_dir():
            raise CheckpointError(f"The bundled model is missing from {BUNDLED_MODEL}.")
        return BUNDLED_MODEL
    source = str(source).strip()
    path = Path(source).expanduser()
    if path.is_dir() or (path.is_file() and path.suffix.lower() == ".gguf"):
        return path
    if path.exists():
        raise CheckpointError(
            f"{source} is a file; give a .gguf file or the directory that holds config.json."
        )
    if source.startswith((".", "/", "~")) or not HUB_ID.match(source):
        raise CheckpointError(f"No directory {source!r}, and it is not a hub id of the form 'org/name'.")
    return _download(source)


def _download(repo_id: str) -> Path:
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


def read_config(path: Path) -> ModelConfig:
    config_file = path / "config.json"
    if not config_file.is_file():
        raise CheckpointError(f"{path} has no config.json; is it a Hugging Face model directory?")
    try:
        return ModelConfig.from_hf_config(json.loads(config_file.read_text()))
    except UnsupportedConfigError as error:
        raise CheckpointError(f"{path.name}: {error}") from None
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{config_file} is not a valid model config: {error!r}") from None


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """All weights of the directory, from safetensors only (single file or sharded)."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        files = [path / shard for shard in shards]
    else:
        files = sorted(path.glob("*.safetensors"))
    if not files:
        pickled = [p.name for p in path.iterdir() if p.suffix in PICKLED_SUFFIXES]
        if pickled:
            raise CheckpointError(
                f"{path} holds only pickled weights ({', '.join(pickled)}). They are refused: "
                "loading a pickle can run arbitrary code. Convert them to safetensors."
            )
        raise CheckpointError(f"{path} has no *.safetensors weights.")
    state: dict[str, torch.Tensor] = {}
    for file in files:
        if not file.is_file():
            raise CheckpointError(f"The shard {file.name} named in the index is missing.")
        state.update(load_file(file))
    return state


def from_hf_state_dict(hf_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """HF Llama keys (`model.layers.0...`, `lm_head.weight`) -> ours (`layers.0...`)."""
    return {
        key.removeprefix("model."): value
        for key, value in hf_state.items()
        if not key.endswith("rotary_emb.inv_freq")
    }


def to_hf_state_dict(model: Transformer) -> dict[str, torch.Tensor]:
    """Our weights under HF Llama keys, tied head left out, ready for `save_file`."""
    state = {}
    for key, value in model.state_dict().items():
        if key == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        hf_key = key if key.startswith("lm_head.") else f"model.{key}"
        state[hf_key] = value.detach().contiguous().cpu()
    return state


def build_model(config: ModelConfig, hf_state: dict[str, torch.Tensor], dtype=torch.float32):
    with torch.device("meta"):
        model = Transformer(config)
    state = from_hf_state_dict(hf_state)
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    shapes = {key: value.shape for key, value in model.state_dict().items()}
    expected = {k for k in shapes if not (config.tie_word_embeddings and k == "lm_head.weight")}
    missing, unexpected = sorted(expected - state.keys()), sorted(state.keys() - expected)
    if missing or unexpected:
        raise CheckpointError(
            "The weights do not fit the config: "
            + (f"missing {missing[:5]}{' …' if len(missing) > 5 else ''} " if missing else "")
            + (f"unexpected {unexpected[:5]}{' …' if len(unexpected) > 5 else ''}" if unexpected else "")
        )
    for key, value in state.items():
        if value.shape != shapes[key]:
            raise CheckpointError(
                f"{key} has shape {tuple(value.shape)}, the config implies {tuple(shapes[key])}."
            )
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=False, assign=True)
    if config.tie_word_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    model.inv_freq = config_inverse_frequencies(config)  # built on meta with the rest; make it real
    return model.eval()


def read_tokenizer(path: Path) -> Tokenizer:
    file = path / "tokenizer.json"
    if not file.is_file():
        raise CheckpointError(
            f"{path} has no tokenizer.json (the fast-tokenizer file); only that format is read."
        )
    try:
        return Tokenizer.from_file(str(file))
    except Exception as error:
        raise CheckpointError(f"{file} could not be read: {error}") from None


def load_checkpoint(source: str | Path | None = None, dtype=torch.float32, progress=None) -> Checkpoint:
    """The model `source` names, on the CPU. `progress(fraction, message)` hears what loading does."""
    path = resolve(source)
    if path.is_file():
        from explorer.gguf import load_gguf

        return load_gguf(path, dtype, progress)
    config = read_config(path)
    model = build_model(config, read_state_dict(path), dtype)
    name = "bundled: " + path.name if path == BUNDLED_MODEL else str(source)
    return Checkpoint(name=name, path=path, config=config, model=model, tokenizer=read_tokenizer(path))


def save_checkpoint(model: Transformer, tokenizer: Tokenizer, out: Path) -> None:
    """Write config.json (HF Llama layout), model.safetensors and tokenizer.json into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(model.config.to_hf_config(), indent=2) + "\n")
    save_file(to_hf_state_dict(model), out / "model.safetensors", metadata={"format": "pt"})
    tokenizer.save(str(out / "tokenizer.json"))
