"""A GGUF file's tokenizer: its token list checked against the model, then built by transformers from
the file's metadata, exactly as `AutoTokenizer.from_pretrained(dir, gguf_file=...)` builds it
(transformers is imported lazily, for .gguf files only), so token ids agree with transformers'."""

from __future__ import annotations

from pathlib import Path

from explorer.engine.config import ModelConfig, brief
from explorer.errors import CheckpointError
from explorer.loading.gguf_header import Header


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


def read_tokenizer(path: Path, model_type: str):
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
