"""Hugging Face-layout folders: config.json, safetensors weights (a single file or shards behind
`model.safetensors.index.json`) and tokenizer.json, each read within a size limit and checked before a
weight is read. Pickled weights are refused, never unpickled, and no remote code is ever run.
`save_checkpoint` writes our model back in that layout.
"""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from explorer.engine import deadline
from explorer.engine.config import ModelConfig, brief
from explorer.engine.model import Transformer
from explorer.errors import CheckpointError, UnsupportedConfigError
from explorer.loading.weights import (
    Checkpoint,
    Fits,
    build_model,
    check_fits,
    check_shapes,
    to_hf_state_dict,
    tokenizer_nbytes,
)

PICKLED_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
INDEX = "model.safetensors.index.json"
# The most bytes read of each JSON file (a model's config.json is ~1 KB, an index ~30 KB, a tokenizer
# of a 256k vocabulary ~35 MB) and of a safetensors header (the safetensors library's own limit).
JSON_MAX_BYTES = {"config.json": 1 << 20, INDEX: 16 << 20}
TOKENIZER_MAX_BYTES = 64 << 20
SAFETENSORS_HEADER_MAX_BYTES = 100_000_000
FLOAT_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}  # safetensors dtype -> bytes per value


def read_json(file: Path) -> object:
    """A checkpoint's JSON file, refused unread past its size limit (JSON_MAX_BYTES)."""
    most = JSON_MAX_BYTES.get(file.name, 1 << 20)
    size = file.stat().st_size
    if size > most:
        raise CheckpointError(f"{file.name} is {size:,} bytes; at most {most:,} are read.")
    try:
        return json.loads(file.read_bytes())
    except (ValueError, RecursionError):
        raise CheckpointError(f"{file.name} is not valid JSON.") from None


def read_config(path: Path) -> ModelConfig:
    """The model's config.json as a ModelConfig; its sizes checked (whole numbers, within bounds)."""
    config_file = path / "config.json"
    if not config_file.is_file():
        raise CheckpointError("there is no config.json; is it a Hugging Face model directory?")
    hf = read_json(config_file)
    if not isinstance(hf, dict):
        raise CheckpointError("config.json does not hold a JSON object.")
    try:
        return ModelConfig.from_hf_config(hf)
    except UnsupportedConfigError as error:
        raise CheckpointError(str(error)) from None
    except KeyError as error:
        raise CheckpointError(f"config.json has no {brief(error.args[0])}.") from None
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"config.json is not a valid model config: {error}") from None


def safetensors_files(path: Path) -> list[Path]:
    """The weight files of a directory: the shards its index names (each inside the directory), else
    every *.safetensors file. Pickled weights are refused, never opened."""
    if (path / INDEX).is_file():
        index = read_json(path / INDEX)
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise CheckpointError(f"{INDEX} has no weight_map from tensor names to shard files.")
        return [_shard(path, name) for name in sorted(set(weight_map.values()))]
    files = sorted(path.glob("*.safetensors"))
    if not files:
        pickled = sorted({p.suffix for p in path.iterdir() if p.suffix in PICKLED_SUFFIXES})
        if pickled:
            raise CheckpointError(
                f"it holds only pickled weights ({', '.join(pickled)}). They are refused: "
                "loading a pickle can run arbitrary code. Convert them to safetensors."
            )
        raise CheckpointError("it has no *.safetensors weights.")
    return files


def _shard(path: Path, name: str) -> Path:
    """A shard named by the index: a .safetensors file inside the checkpoint, never `../` or `/`."""
    relative = PurePosixPath(name)
    if relative.is_absolute() or ".." in relative.parts or "\\" in name or relative.suffix != ".safetensors":
        raise CheckpointError(
            f"{INDEX} names a shard {brief(name)} that is not a .safetensors file inside the checkpoint; "
            "it is refused."
        )
    file = path / relative
    if not file.is_file():
        raise CheckpointError(f"The shard {brief(name)} named in {INDEX} is missing.")
    return file


def tensor_shapes(files: list[Path]) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape, from the safetensors headers alone (no weight is read)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for file in files:
        for name, shape in _header_shapes(file).items():
            if name in shapes:
                raise CheckpointError(
                    f"The tensor {brief(name)} is stored twice, in {file.name} and another."
                )
            shapes[name] = shape
    return shapes


def _header_shapes(file: Path) -> dict[str, tuple[int, ...]]:
    """A safetensors header: 8 bytes of length, then JSON {name: {dtype, shape, data_offsets}}, each
    tensor checked against the bytes the file holds."""
    not_safetensors = CheckpointError(
        f"{file.name} is not a safetensors file (a renamed pickle, or damaged); it is refused unread."
    )
    size = file.stat().st_size
    with open(file, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise not_safetensors
        (length,) = struct.unpack("<Q", head)
        if length > min(SAFETENSORS_HEADER_MAX_BYTES, size - 8):
            raise not_safetensors
        try:
            header = json.loads(handle.read(length))
        except (ValueError, RecursionError):
            raise not_safetensors from None
    if not isinstance(header, dict):
        raise not_safetensors
    data_bytes = size - 8 - length
    shapes = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict):
            raise not_safetensors
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in FLOAT_DTYPES:
            raise CheckpointError(f"{file.name}: tensor {brief(name)} is {brief(dtype)}; weights are floats.")
        if not _whole_numbers(shape) or not _whole_numbers(offsets) or len(offsets) != 2:
            raise not_safetensors
        begin, end = offsets
        if not begin <= end <= data_bytes or end - begin != math.prod(shape) * FLOAT_DTYPES[dtype]:
            raise not_safetensors
        shapes[name] = tuple(shape)
    return shapes


def _whole_numbers(values: object) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values
    )


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """All weights of the directory, from safetensors only (single file or sharded)."""
    state: dict[str, torch.Tensor] = {}
    for file in safetensors_files(path):
        deadline.stopped()  # a page's Stop ends its load between two files
        try:
            state.update(load_file(file))
        except Exception as error:  # the safetensors library raises its own error types
            raise CheckpointError(f"{file.name} could not be read: {brief(str(error), 120)}") from None
    return state


# What a tokenizer.json may hold, checked before it is built (`inspect_tokenizer`). The tokenizers
# library builds it holding Python's lock throughout, so while it builds the server answers no one:
# 400,000 added tokens (62.7 MB) held every page for 6.5 s and 3 GB. Added tokens cost most (a
# matcher over all of them): real models have a few hundred, Gemma's ~6,000 short ones.
MAX_ADDED_TOKENS = 1 << 16
MAX_ADDED_TOKEN_BYTES = 1 << 20  # their text together
MAX_TOKENIZER_ENTRIES = 1 << 20  # vocabulary, merges and added tokens together (~2 s to build here)
INSPECT_SECONDS = 60.0

# The tokenizer.json is read in a child process: parsing 64 MB of JSON here would hold the server
# for a second and hundreds of MB of Python objects. It prints what the checks need, as JSON.
_INSPECT = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
with open(sys.argv[1], "rb") as file:
    data = json.load(file)
model = data.get("model") if isinstance(data, dict) else None
model = model if isinstance(model, dict) else {}
vocab = model.get("vocab") or {}
ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))
names = list(vocab) if isinstance(vocab, dict) else [v[0] if isinstance(v, list) and v else "" for v in vocab]
added = data.get("added_tokens") or [] if isinstance(data, dict) else []
added = [t for t in added if isinstance(t, dict)] if isinstance(added, list) else []
ids += [t.get("id") for t in added]
names += [t.get("content") for t in added]
ids = [i if isinstance(i, int) and not isinstance(i, bool) else -1 for i in ids]
top = max(range(len(ids)), key=ids.__getitem__, default=None)
print(json.dumps({
    "vocab": len(vocab),
    "merges": len(model.get("merges") or []),
    "added": len(added),
    "added_bytes": sum(len(str(t.get("content", "")).encode("utf-8", "replace")) for t in added),
    "max_id": ids[top] if top is not None else -1,
    "max_id_token": str(names[top])[:40] if top is not None else "",
    "min_id": min(ids, default=0),
}))
"""


@dataclass(frozen=True)
class TokenizerCounts:
    """What a tokenizer holds, counted before it is built."""

    vocab: int
    merges: int
    added: int  # added (special) tokens
    added_bytes: int  # their text together
    max_id: int
    max_id_token: str = ""
    min_id: int = 0

    def nbytes(self) -> int:
        return tokenizer_nbytes(self.vocab, self.merges, self.added, self.added_bytes)


def inspect_tokenizer(file: Path) -> TokenizerCounts:
    """Count what `file` (a tokenizer.json) holds, reading it in a child process."""
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _INSPECT, str(file)],
            capture_output=True,
            text=True,
            timeout=INSPECT_SECONDS,
        )
        counts = TokenizerCounts(**json.loads(done.stdout)) if done.returncode == 0 else None
    except (subprocess.TimeoutExpired, ValueError, TypeError):
        counts = None
    if counts is None:
        raise CheckpointError("tokenizer.json could not be read (not valid JSON, or too large to parse).")
    return counts


def check_tokenizer(counts: TokenizerCounts, vocab_size: int) -> None:
    """Refuse a tokenizer too large to build without holding the server, or whose ids pass the model's
    vocabulary (a prompt holding one would index past the embedding)."""
    if counts.added > MAX_ADDED_TOKENS or counts.added_bytes > MAX_ADDED_TOKEN_BYTES:
        raise CheckpointError(
            f"tokenizer.json adds {counts.added:,} tokens ({counts.added_bytes:,} bytes of text); at most "
            f"{MAX_ADDED_TOKENS:,} tokens and {MAX_ADDED_TOKEN_BYTES:,} bytes are built."
        )
    if counts.max_id >= vocab_size or counts.min_id < 0:
        bad = counts.max_id if counts.max_id >= vocab_size else counts.min_id
        raise CheckpointError(
            f"tokenizer.json gives a token ({brief(counts.max_id_token)}) the id {brief(bad)}, outside the "
            f"model's vocabulary of {vocab_size:,} embeddings."
        )
    entries = counts.vocab + counts.merges + counts.added
    if entries > MAX_TOKENIZER_ENTRIES or counts.vocab > vocab_size:
        raise CheckpointError(
            f"tokenizer.json holds {counts.vocab:,} tokens and {counts.merges:,} merges for a vocabulary of "
            f"{vocab_size:,}; at most {vocab_size:,} tokens and {MAX_TOKENIZER_ENTRIES:,} entries are built."
        )


def read_tokenizer(path: Path, vocab_size: int | None = None) -> tuple[Tokenizer, int]:
    """The folder's tokenizer.json, counted and checked (`check_tokenizer`, against `vocab_size` if
    given) before it is built; with the estimate of the memory it holds."""
    file = path / "tokenizer.json"
    if not file.is_file():
        raise CheckpointError(
            "there is no tokenizer.json (the fast-tokenizer file); only that format is read."
        )
    if file.stat().st_size > TOKENIZER_MAX_BYTES:
        raise CheckpointError(f"tokenizer.json is larger than {TOKENIZER_MAX_BYTES:,} bytes; it is not read.")
    counts = inspect_tokenizer(file)
    if vocab_size is not None:
        check_tokenizer(counts, vocab_size)
    try:
        return Tokenizer.from_file(str(file)), counts.nbytes()
    except Exception as error:
        raise CheckpointError(f"tokenizer.json could not be read: {brief(str(error), 120)}") from None


def load_folder(path: Path, name: str, dtype=torch.float32, fits: Fits | None = None) -> Checkpoint:
    """The model in a folder. Everything is checked before a weight is read: the config's sizes, the
    shard paths, every tensor's shape in the safetensors headers, and (told to `fits`, if given) the
    model's size in `dtype`."""
    try:
        config = read_config(path)
        check_shapes(config, tensor_shapes(safetensors_files(path)))
        check_fits(config, dtype, fits)
        tokenizer, tokenizer_bytes = read_tokenizer(path, config.vocab_size)
        check_fits(config, dtype, fits, tokenizer_bytes)
        model = build_model(config, read_state_dict(path), dtype)
    except CheckpointError as error:
        raise CheckpointError(f"{name}: {error}") from None
    return Checkpoint(
        name=name, path=path, config=config, model=model, tokenizer=tokenizer, tokenizer_bytes=tokenizer_bytes
    )


def save_checkpoint(model: Transformer, tokenizer: Tokenizer, out: Path) -> None:
    """Write config.json (HF Llama layout), model.safetensors and tokenizer.json into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(model.config.to_hf_config(), indent=2) + "\n")
    save_file(to_hf_state_dict(model), out / "model.safetensors", metadata={"format": "pt"})
    tokenizer.save(str(out / "tokenizer.json"))
