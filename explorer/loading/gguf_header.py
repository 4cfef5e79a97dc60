"""A GGUF file's header: its metadata and tensor table, read with a few struct reads, with only the
metadata values we use decoded (`gguf.GGUFReader` decodes every string of the vocabulary and merges
into numpy views first: 6 s for SmolLM2's 98,000 strings, against 0.05 s here). A truncated or
damaged file, a tensor of a type we cannot dequantize, is a `CheckpointError` before any tensor data
is read."""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from explorer.errors import CheckpointError

TENSOR_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K")
TENSOR_TYPES += ("Q6_K",)
MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32

# GGUF metadata value types (gguf-py `GGUFValueType`): struct format of each fixed-size one.
_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True, kw_only=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # torch order (rows first): GGUF lists dimensions fastest-moving first
    type_name: str  # ggml type, e.g. "Q4_K"
    start: int  # byte offset in the file
    nbytes: int


@dataclass(frozen=True)
class Header:
    metadata: dict[str, Any]  # arrays of strings are kept as their length only
    tensors: dict[str, TensorInfo]

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def key(self, name: str, default: Any = None) -> Any:
        """An architecture key: `key("block_count")` reads `llama.block_count` in a llama file."""
        return self.metadata.get(f"{self.architecture}.{name}", default)


def read_header(path: Path) -> Header:
    """Metadata and tensor table, checked against the file's size; no tensor data is read."""
    with open(path, "rb") as file:
        try:
            blob = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            raise CheckpointError(f"{path.name} is empty, not a GGUF file.") from None
    with blob:
        if blob[:4] != MAGIC:
            raise CheckpointError(f"{path.name} is not a GGUF file (it does not start with 'GGUF').")
        try:
            return _parse(blob, path.name)
        except (struct.error, UnicodeDecodeError, OverflowError, MemoryError):
            raise CheckpointError(
                f"{path.name} is truncated or damaged: its header cannot be read to the end."
            ) from None


def _parse(blob: mmap.mmap, name: str) -> Header:
    version, n_tensors, n_values = struct.unpack_from("<IQQ", blob, 4)
    if version not in VERSIONS:
        raise CheckpointError(f"{name} is GGUF version {version}; versions 2 and 3 are read.")
    position, metadata = 24, {}
    for _ in range(n_values):
        key, position = _string(blob, position)
        (value_type,) = struct.unpack_from("<I", blob, position)
        metadata[key], position = _value(blob, position + 4, value_type)
    entries = []
    for _ in range(n_tensors):
        tensor_name, position = _string(blob, position)
        (n_dims,) = struct.unpack_from("<I", blob, position)
        dims = struct.unpack_from(f"<{n_dims}Q", blob, position + 4)
        type_id, offset = struct.unpack_from("<IQ", blob, position + 4 + 8 * n_dims)
        position += 4 + 8 * n_dims + 12
        entries.append((tensor_name, tuple(reversed(dims)), type_id, offset))
    alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT))
    data_start = -(-position // alignment) * alignment
    tensors = {}
    for tensor_name, shape, type_id, offset in entries:
        type_name, nbytes = _type_and_size(tensor_name, shape, type_id)
        start = data_start + offset
        if start + nbytes > len(blob):
            raise CheckpointError(
                f"{name} is truncated: tensor {tensor_name} ends at byte {start + nbytes:,}, "
                f"the file has {len(blob):,}."
            )
        tensors[tensor_name] = TensorInfo(
            name=tensor_name, shape=shape, type_name=type_name, start=start, nbytes=nbytes
        )
    return Header(metadata, tensors)


def _string(blob, position: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<Q", blob, position)
    end = position + 8 + length
    if end > len(blob):
        raise struct.error("string past the end of the file")
    return blob[position + 8 : end].decode("utf-8"), end


def _value(blob, position: int, value_type: int) -> tuple[Any, int]:
    if value_type in _SCALARS:
        fmt = _SCALARS[value_type]
        return struct.unpack_from(fmt, blob, position)[0], position + struct.calcsize(fmt)
    if value_type == _STRING:
        return _string(blob, position)
    if value_type == _ARRAY:
        item_type, count = struct.unpack_from("<IQ", blob, position)
        position += 12
        if item_type in _SCALARS:
            fmt = _SCALARS[item_type]
            values = struct.unpack_from(f"<{count}{fmt[1]}", blob, position)
            return list(values), position + count * struct.calcsize(fmt)
        if item_type == _STRING:  # a vocabulary or merge table: walked over, kept as its length
            for _ in range(count):
                (length,) = struct.unpack_from("<Q", blob, position)
                position += 8 + length
            return count, position
    raise CheckpointError(f"The GGUF metadata holds a value of unknown type {value_type}.")


def _type_and_size(name: str, shape: tuple[int, ...], type_id: int) -> tuple[str, int]:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        ggml_type = GGMLQuantizationType(type_id)
    except ValueError:
        raise CheckpointError(f"Tensor {name} has an unknown ggml type ({type_id}).") from None
    if ggml_type.name not in TENSOR_TYPES:
        raise CheckpointError(
            f"Tensor {name} is stored as {ggml_type.name}, which is not supported "
            f"(supported: {', '.join(TENSOR_TYPES)})."
        )
    block, block_bytes = GGML_QUANT_SIZES[ggml_type]
    elements = int(np.prod(shape, dtype=np.int64))
    if shape and shape[-1] % block:
        raise CheckpointError(f"Tensor {name}: rows of {shape[-1]} values do not fill {block}-value blocks.")
    return ggml_type.name, elements // block * block_bytes
