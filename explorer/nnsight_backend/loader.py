"""The checkpoint behind `explorer.load(source, backend="nnsight", remote=...)`.

Local (remote=False): a Hugging Face folder (or a hub id, downloaded as `loading.hub` does, within its
limit), checked as our own loader checks it, then loaded by transformers (safetensors only, no remote
code) and wrapped by nnsight's `TransformersModel`; our model shares its weight tensors.
Remote (remote=True): the model is NDIF's; here only its config and tokenizer, and the weights our views
read, fetched as saved tensors (`weights`). The key is read from NDIF_API_KEY before anything else: a
missing key fails at once, naming it, with no network asked.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path

import torch

from explorer.engine.config import ModelConfig
from explorer.errors import CheckpointError, UnsupportedConfigError
from explorer.loading.checkpoints import resolve
from explorer.loading.folders import read_config, read_tokenizer, safetensors_files, tensor_shapes
from explorer.loading.hub import bytes_from_environment
from explorer.loading.weights import (
    Checkpoint,
    Fits,
    ModelSize,
    build_model,
    check_fits,
    check_shapes,
    expected_shapes,
)
from explorer.nnsight_backend.families import family
from explorer.nnsight_backend.traced import TracedTransformer
from explorer.nnsight_backend.weights import DEFAULT_BLOCK_BUDGET_BYTES, fetched_model, remote_fetch

KEY_VARIABLE = "NDIF_API_KEY"
MAX_MOVED_MB_VARIABLE = "EXPLORER_NDIF_MAX_MB"  # the most a remote forward may move back, in MB
DEFAULT_MAX_MOVED_MB = 512.0
INSTALL = "pip install 'attention-explorer[ndif]' (nnsight==0.8.1)"


def ndif_key() -> str:
    """The NDIF API key from NDIF_API_KEY; a CheckpointError naming the variable when it is unset."""
    key = os.environ.get(KEY_VARIABLE, "").strip()
    if not key:
        raise CheckpointError(
            f"A remote model runs on NDIF with your API key: set {KEY_VARIABLE} (get one at "
            "https://login.ndif.us), or load it with remote=False."
        )
    return key


def max_moved_bytes() -> float:
    """The most a remote forward may move back, from $EXPLORER_NDIF_MAX_MB (default 512 MB)."""
    return bytes_from_environment(MAX_MOVED_MB_VARIABLE, DEFAULT_MAX_MOVED_MB, "MB", 1e6)


def _nnsight():
    try:
        from nnsight import TransformersModel
    except ImportError:
        raise CheckpointError(f"The nnsight backend needs nnsight: {INSTALL}.") from None
    return TransformersModel


def load_checkpoint(
    source: str | Path,
    remote: bool | str = False,
    fits: Fits | None = None,
    device: torch.device | str = "cpu",
    max_moved: float | None = None,
    block_budget: int = DEFAULT_BLOCK_BUDGET_BYTES,
) -> Checkpoint:
    """The model `source` names, run through nnsight: here (remote=False), on NDIF (True; a hub id), or
    in nnsight's local simulation of a remote request ("local": a folder, for tests). A local model is
    put on `device` before our model takes its tensors, so the two share them there."""
    if remote is True:
        key = ndif_key()
    if source is None or not str(source).strip():
        raise CheckpointError("The nnsight backend runs a Hugging Face model: give its folder or hub id.")
    if remote:
        return _remote(
            str(source).strip(), remote, key if remote is True else None, max_moved, block_budget, fits
        )
    return _local(resolve(source), str(source).strip(), fits, torch.device(device))


def _local(path: Path, name: str, fits: Fits | None, device: torch.device) -> Checkpoint:
    if path.is_file():
        raise CheckpointError(
            f"{name}: the nnsight backend runs Hugging Face folders (safetensors), not GGUF."
        )
    transformers_model = _nnsight()
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    try:
        config = read_config(path)
        check_shapes(config, tensor_shapes(safetensors_files(path)))
        check_fits(config, torch.float32, fits)
        tokenizer, tokenizer_bytes = read_tokenizer(path, config.vocab_size)
        check_fits(config, torch.float32, fits, tokenizer_bytes)
        hf_model = AutoModelForCausalLM.from_pretrained(
            path,
            use_safetensors=True,
            dtype=torch.float32,
            attn_implementation="sdpa",
            trust_remote_code=False,
        )
    except CheckpointError as error:
        raise CheckpointError(f"{name}: {error}") from None
    except Exception as error:  # transformers raises many types; the person needs one message
        raise CheckpointError(f"{name}: transformers could not load it: {error}") from None
    hf_model.to(device).eval().requires_grad_(False)
    model = build_model(config, hf_model.state_dict())  # the same tensors, under our names
    lm = transformers_model(
        hf_model, task="text-generation", tokenizer=PreTrainedTokenizerFast(tokenizer_object=tokenizer)
    )
    return Checkpoint(
        name=f"{name} (nnsight)",
        path=path,
        config=config,
        model=TracedTransformer(lm, model),
        tokenizer=tokenizer,
        tokenizer_bytes=tokenizer_bytes,
    )


def _remote(
    source: str, remote: bool | str, key: str | None, max_moved: float | None, block_budget: int, fits
) -> Checkpoint:
    transformers_model = _nnsight()
    if key is not None:
        from nnsight import CONFIG

        CONFIG.API.APIKEY = key  # this process alone: set_default_api_key would write nnsight's config file
    tokenizer = None
    if Path(source).is_dir():  # a folder (nnsight's simulation of a remote run): its checked tokenizer
        from transformers import PreTrainedTokenizerFast

        tokenizer = PreTrainedTokenizerFast(tokenizer_object=read_tokenizer(Path(source))[0])
    try:
        # NDIF serves its own dtype (the checkpoint's); the simulation runs here, in float32 as our engine
        dtype = {"dtype": torch.float32} if remote == "local" else {}
        lm = transformers_model(
            source, task="text-generation", tokenizer=tokenizer, use_safetensors=True, **dtype
        )
        config = ModelConfig.from_hf_config(lm.config.to_dict())
    except UnsupportedConfigError as error:
        raise CheckpointError(f"{source}: {error}") from None
    except Exception as error:  # the hub and nnsight raise many types; the person needs one message
        raise CheckpointError(f"{source} could not be opened through nnsight: {error}") from None
    if fits is not None:
        # what may be held here: the embedding, final norm and LM head, and the blocks' budget
        shapes = expected_shapes(config)
        held = [name for name in shapes if not name.startswith("model.layers.")]
        n_held = sum(math.prod(shapes[name]) for name in held) + block_budget // 4
        fits(ModelSize(n_held, torch.float32))
    fam = family(config.model_type)
    tracing = threading.RLock()
    model = fetched_model(config, remote_fetch(lm, fam.decoder, remote, tracing), block_budget)
    limit = max_moved_bytes() if max_moved is None else max_moved
    return Checkpoint(
        name=f"{source} ({'NDIF' if remote is True else 'nnsight, remote simulated'})",
        path=Path(source),
        config=config,
        model=TracedTransformer(lm, model, remote=remote, max_moved_bytes=limit, tracing=tracing),
        tokenizer=lm.tokenizer.backend_tokenizer,
    )
