"""A GGUF file's tokenizer: its token list checked against the model, then built by transformers from
the file's metadata, exactly as `AutoTokenizer.from_pretrained(dir, gguf_file=...)` builds it
(transformers is imported lazily, for .gguf files only), so token ids agree with transformers'.

Building it is slow for a large vocabulary (transformers derives a SentencePiece model's merges in
Python: 11 s for Gemma 3's 262,144 tokens), so the tokenizer built is kept in the user's cache
(`explorer.loading.user_cache`) as its own JSON, under a key of the file's metadata bytes and the
versions of transformers and tokenizers, and read back from there the next time (about 1 s).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
from pathlib import Path

from tokenizers import Tokenizer

from explorer.engine.config import ModelConfig, brief
from explorer.errors import CheckpointError
from explorer.loading import user_cache
from explorer.loading.gguf_header import Header

log = logging.getLogger(__name__)

CACHE_FOLDER = "tokenizers"
CACHE_FORMAT = "1"  # bump when what is kept changes


def check_tokenizer(header: Header, config: ModelConfig, name: str) -> None:
    """The token list is there and no longer than the embedding (each token needs a row), and the
    BOS and EOS ids name tokens of it: checked before transformers decodes a single token."""
    tokens = header.string_arrays.get("tokenizer.ggml.tokens")
    if tokens is None:
        raise CheckpointError(f"{name} has no token list (tokenizer.ggml.tokens), so no tokenizer.")
    n_tokens, _ = tokens
    if n_tokens > config.vocab_size:
        raise CheckpointError(
            f"{name} lists {n_tokens:,} tokens for an embedding of {config.vocab_size:,} rows."
        )
    for key in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
        token_id = header.metadata.get(key)
        if token_id is not None and not (isinstance(token_id, int) and 0 <= token_id < n_tokens):
            raise CheckpointError(
                f"{name}: {key} is {brief(token_id)}, not one of the {n_tokens:,} tokens it lists."
            )


def read_tokenizer(path: Path, model_type: str, header: Header) -> Tokenizer:
    """The tokenizer transformers builds from this file's metadata (`header`, as read), from the
    user's cache when it was built before."""
    name = f"{CACHE_FOLDER}/{cache_key(path, model_type, header)}.json"
    kept = user_cache.read_text(name)
    if kept is not None:
        try:
            return Tokenizer.from_str(kept)
        except Exception as error:  # a damaged entry: built again, and replaced
            log.warning("the cached tokenizer %s could not be read (%s): building it again", name, error)
    tokenizer = build_tokenizer(path, model_type)
    user_cache.write_text(name, tokenizer.to_str())
    return tokenizer


def cache_key(path: Path, model_type: str, header: Header) -> str:
    """What the tokenizer is built from: the file's bytes before its tensor data (its header, all the
    metadata), the model type, and the code that builds it."""
    metadata_end = min((t.start for t in header.tensors.values()), default=0)
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        remaining = metadata_end
        while remaining > 0 and (block := file.read(min(remaining, 1 << 22))):
            digest.update(block)
            remaining -= len(block)
    for package in ("transformers", "tokenizers"):
        digest.update(f"\0{package} {_version(package)}".encode())
    digest.update(f"\0{model_type}\0{CACHE_FORMAT}".encode())
    return digest.hexdigest()


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def build_tokenizer(path: Path, model_type: str) -> Tokenizer:
    """The tokenizer transformers builds from this file's metadata, as a `tokenizers.Tokenizer` (its
    post-processor adds BOS where the file asks for it). The class is the one `AutoTokenizer` picks
    for the model type (Qwen2Tokenizer for qwen2, TokenizersBackend otherwise); naming it saves
    AutoTokenizer's second full read of the file (15 s for SmolLM2) to find the model type."""
    try:
        from transformers import AutoTokenizer, TokenizersBackend
        from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES
    except ImportError:
        raise CheckpointError(
            "Reading a GGUF file's tokenizer needs transformers (pip install transformers)."
        ) from None
    try:
        if TOKENIZER_MAPPING_NAMES.get(model_type) not in (None, "TokenizersBackend", "MistralCommonBackend"):
            tokenizer = AutoTokenizer.from_pretrained(
                str(path.parent), gguf_file=path.name, tokenizer_type=model_type
            )
        else:
            tokenizer = TokenizersBackend.from_pretrained(str(path.parent), gguf_file=path.name)
    except Exception as error:  # its converters raise many types; the person needs one message
        raise CheckpointError(f"The tokenizer in {path.name} could not be built: {error}") from None
    return tokenizer.backend_tokenizer
