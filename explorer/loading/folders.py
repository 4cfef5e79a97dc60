"""Hugging Face-layout folders: config.json, safetensors weights (a single file or shards behind
`model.safetensors.index.json`) and tokenizer.json, each read within a size limit and checked before a
weight is read. Pickled weights are refused, never unpickled, and no remote code is ever run.
`save_checkpoint` writes our model back in that layout.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path, PurePosixPath

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from explorer.engine.config import ModelConfig, brief
from explorer.engine.model import Transformer
from explorer.errors import CheckpointError, UnsupportedConfigError
from explorer.loading.weights import Checkpoint, build_model, check_fits, check_shapes, to_hf_state_dict

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
        try:
            state.update(load_file(file))
        except Exception as error:  # the safetensors library raises its own error types
            raise CheckpointError(f"{file.name} could not be read: {brief(str(error), 120)}") from None
    return state


def read_tokenizer(path: Path) -> Tokenizer:
    file = path / "tokenizer.json"
    if not file.is_file():
        raise CheckpointError(
            "there is no tokenizer.json (the fast-tokenizer file); only that format is read."
        )
    if file.stat().st_size > TOKENIZER_MAX_BYTES:
        raise CheckpointError(f"tokenizer.json is larger than {TOKENIZER_MAX_BYTES:,} bytes; it is not read.")
    try:
        return Tokenizer.from_file(str(file))
    except Exception as error:
        raise CheckpointError(f"tokenizer.json could not be read: {brief(str(error), 120)}") from None


def load_folder(path: Path, name: str, dtype=torch.float32, max_bytes: float | None = None) -> Checkpoint:
    """The model in a folder. Everything is checked before a weight is read: the config's sizes, the
    shard paths, every tensor's shape in the safetensors headers, and (if `max_bytes` is given) the
    weights' size in `dtype`."""
    try:
        config = read_config(path)
        check_shapes(config, tensor_shapes(safetensors_files(path)))
        check_fits(config, dtype, max_bytes)
        tokenizer = read_tokenizer(path)
        model = build_model(config, read_state_dict(path), dtype)
    except CheckpointError as error:
        raise CheckpointError(f"{name}: {error}") from None
    return Checkpoint(name=name, path=path, config=config, model=model, tokenizer=tokenizer)


def save_checkpoint(model: Transformer, tokenizer: Tokenizer, out: Path) -> None:
    """Write config.json (HF Llama layout), model.safetensors and tokenizer.json into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(model.config.to_hf_config(), indent=2) + "\n")
    save_file(to_hf_state_dict(model), out / "model.safetensors", metadata={"format": "pt"})
    tokenizer.save(str(out / "tokenizer.json"))
