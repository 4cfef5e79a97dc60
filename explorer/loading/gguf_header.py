"""A GGUF file's header: its metadata and tensor table, read with a few struct reads, with only the
metadata values we use decoded (`gguf.GGUFReader` decodes every string of the vocabulary and merges
into numpy views first: 6 s for SmolLM2's 98,000 strings, against 0.05 s here). A truncated or
damaged file, an array too long for any tokenizer, a tensor of a type we cannot dequantize, tensors
whose data leave the file, are misaligned or overlap: each is a `CheckpointError` before any tensor
data is read."""

from __future__ import annotations

import itertools
import math
import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from explorer.engine.config import brief, brief_count
from explorer.errors import CheckpointError

TENSOR_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K")
TENSOR_TYPES += ("Q6_K",)
MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_ALIGNMENT = 1 << 16
# Bounds checked before anything is walked: vocabularies reach 262,144 tokens and merge tables about
# 500,000; Llama 3.1 405B has 126 layers of 9 tensors; files hold a few dozen metadata values.
MAX_ARRAY_ENTRIES = 1 << 21
MAX_TENSORS = 1 << 16
MAX_VALUES = 1 << 16
SHORT_ARRAY = 1024  # arrays of numbers up to this long (per-layer values) are decoded; longer, counted
MAX_DIMS = 4  # ggml's GGML_MAX_DIMS
MAX_NAME_BYTES = 63  # ggml's GGML_MAX_NAME, less its terminating zero

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
_LENGTH = struct.Struct("<Q")


@dataclass(frozen=True, kw_only=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # torch order (rows first): GGUF lists dimensions fastest-moving first
    type_name: str  # ggml type, e.g. "Q4_K"
    start: int  # byte offset in the file
    nbytes: int


@dataclass(frozen=True)
class Header:
    metadata: dict[str, Any]  # an array of strings, or of over SHORT_ARRAY numbers: its length only
    tensors: dict[str, TensorInfo]
    string_arrays: dict[str, tuple[int, int]] = field(default_factory=dict)  # (count, bytes of its strings)
    counted: frozenset[str] = frozenset()  # the keys whose metadata value is an array's length

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def key(self, name: str, default: Any = None) -> Any:
        """An architecture key: `key("block_count")` reads `llama.block_count` in a llama file."""
        return self.metadata.get(f"{self.architecture}.{name}", default)


class _Counted(NamedTuple):
    """A metadata array kept as its length (and, for strings, their total bytes)."""

    count: int
    string_bytes: int | None


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


HEAD_BYTES = 1 << 16  # what `read_architecture` reads of a file


def read_architecture(path: Path) -> str:
    """`general.architecture` of a GGUF file from its first HEAD_BYTES alone, for a scan of many files
    (`explorer.loading.local`): the pairs before it are stepped over with this module's own readers
    (llama.cpp writes it first; Ollama sorts keys, its `<arch>.*` ones first), and a tokenizer's arrays
    are never read. '' for a file that is not GGUF, or names no architecture before its tokenizer."""
    try:
        with open(path, "rb") as file:
            head = file.read(HEAD_BYTES)
        if head[:4] != MAGIC or struct.unpack_from("<I", head, 4)[0] not in VERSIONS:
            return ""
        (n_values,) = struct.unpack_from("<Q", head, 16)
        position = 24
        for _ in range(min(n_values, MAX_VALUES)):
            key, position = _string(head, position)
            if key.startswith("tokenizer."):
                return ""
            (value_type,) = struct.unpack_from("<I", head, position)
            value, position = _value(head, position + 4, value_type, key)
            if key == "general.architecture":
                return value if isinstance(value, str) else ""
    except (OSError, struct.error, UnicodeDecodeError, OverflowError, CheckpointError):
        return ""
    return ""


def _parse(blob: mmap.mmap, name: str) -> Header:
    version, n_tensors, n_values = struct.unpack_from("<IQQ", blob, 4)
    if version not in VERSIONS:
        raise CheckpointError(f"{name} is GGUF version {version}; versions 2 and 3 are read.")
    for what, count, most in (("metadata values", n_values, MAX_VALUES), ("tensors", n_tensors, MAX_TENSORS)):
        if count > most:
            raise CheckpointError(f"{name} declares {brief_count(count)} {what}; at most {most:,} are read.")
    metadata, string_arrays, counted, position = _metadata(blob, 24, n_values, name)
    entries, position = _tensor_table(blob, position, n_tensors, name)
    alignment = _alignment(metadata, counted, name)
    data_start = -(-position // alignment) * alignment
    tensors = {}
    for tensor_name, shape, type_id, offset in entries:
        if tensor_name in tensors:
            raise CheckpointError(f"{name} lists tensor {tensor_name} twice.")
        if offset % alignment:
            raise CheckpointError(
                f"{name}: tensor {tensor_name} starts at data offset {offset:,}, "
                f"not a multiple of the file's alignment ({alignment})."
            )
        type_name, nbytes = _type_and_size(tensor_name, shape, type_id)
        start = data_start + offset
        if start + nbytes > len(blob):
            raise CheckpointError(
                f"{name} is truncated: tensor {tensor_name} of shape {brief(shape)} ends at byte "
                f"{brief_count(start + nbytes)}, the file has {len(blob):,}."
            )
        tensors[tensor_name] = TensorInfo(
            name=tensor_name, shape=shape, type_name=type_name, start=start, nbytes=nbytes
        )
    _check_disjoint(tensors.values(), name)
    return Header(metadata, tensors, string_arrays, frozenset(counted))


def _metadata(blob, position: int, n_values: int, name: str):
    """Every key and value; arrays of strings and long arrays of numbers counted, not decoded.
    -> (metadata, string_arrays, counted keys, position after the last value)"""
    metadata, string_arrays, counted = {}, {}, set()
    for _ in range(n_values):
        key, position = _string(blob, position)
        (value_type,) = struct.unpack_from("<I", blob, position)
        value, position = _value(blob, position + 4, value_type, f"{name}: metadata {brief(key)}")
        if isinstance(value, _Counted):
            value, string_bytes = value
            counted.add(key)
            if string_bytes is not None:
                string_arrays[key] = (value, string_bytes)
        metadata[key] = value
    return metadata, string_arrays, counted, position


def _tensor_table(blob, position: int, n_tensors: int, name: str):
    """Each tensor's (name, shape in torch order, ggml type id, offset in the data) -> (entries, position)"""
    entries = []
    for _ in range(n_tensors):
        tensor_name, position = _string(blob, position)
        if len(tensor_name.encode()) > MAX_NAME_BYTES:
            raise CheckpointError(
                f"{name} names a tensor {brief(tensor_name)} of {len(tensor_name.encode()):,} bytes; "
                f"ggml names have at most {MAX_NAME_BYTES}."
            )
        (n_dims,) = struct.unpack_from("<I", blob, position)
        if not 1 <= n_dims <= MAX_DIMS:
            raise CheckpointError(
                f"{name}: tensor {tensor_name} has {brief_count(n_dims)} dimensions; "
                f"ggml tensors have 1 to {MAX_DIMS}."
            )
        dims = struct.unpack_from(f"<{n_dims}Q", blob, position + 4)
        if 0 in dims:
            raise CheckpointError(f"{name}: tensor {tensor_name} has a dimension of size 0 ({brief(dims)}).")
        type_id, offset = struct.unpack_from("<IQ", blob, position + 4 + 8 * n_dims)
        position += 4 + 8 * n_dims + 12
        entries.append((tensor_name, tuple(reversed(dims)), type_id, offset))
    return entries, position


def _alignment(metadata: dict[str, Any], counted: set[str], name: str) -> int:
    """`general.alignment`: a power of two from 1 to MAX_ALIGNMENT (llama.cpp asks a power of two)."""
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    valid = (
        isinstance(alignment, int) and not isinstance(alignment, bool) and "general.alignment" not in counted
    )
    if not (valid and 0 < alignment <= MAX_ALIGNMENT and alignment & (alignment - 1) == 0):
        shown = f"an array of {alignment:,} values" if "general.alignment" in counted else brief(alignment)
        raise CheckpointError(
            f"{name}: general.alignment is {shown}; it must be a power of two from 1 to {MAX_ALIGNMENT:,}."
        )
    return alignment


def _check_disjoint(tensors, name: str) -> None:
    """No two tensors' bytes overlap: a tensor declared larger than its data would read its neighbour's."""
    regions = sorted(tensors, key=lambda tensor: tensor.start)
    for before, after in itertools.pairwise(regions):
        if after.start < before.start + before.nbytes:
            raise CheckpointError(
                f"{name}: tensors {before.name} (bytes {before.start:,} to {before.start + before.nbytes:,}) "
                f"and {after.name} (from byte {after.start:,}) overlap; each tensor needs bytes of its own."
            )


def _string(blob, position: int) -> tuple[str, int]:
    (length,) = _LENGTH.unpack_from(blob, position)
    end = position + 8 + length
    if end > len(blob):
        raise struct.error("string past the end of the file")
    return blob[position + 8 : end].decode("utf-8"), end


def _value(blob, position: int, value_type: int, where: str) -> tuple[Any, int]:
    if value_type in _SCALARS:
        fmt = _SCALARS[value_type]
        return struct.unpack_from(fmt, blob, position)[0], position + struct.calcsize(fmt)
    if value_type == _STRING:
        return _string(blob, position)
    if value_type == _ARRAY:
        return _array(blob, position, where)
    raise CheckpointError(f"{where} is a value of unknown type {value_type}.")


def _array(blob, position: int, where: str) -> tuple[Any, int]:
    """A short array of numbers as a list; any other array as `_Counted`, walked over, never decoded.
    Its length is checked before a single entry is read."""
    item_type, count = struct.unpack_from("<IQ", blob, position)
    position += 12
    if count > MAX_ARRAY_ENTRIES:
        raise CheckpointError(
            f"{where} is an array of {brief_count(count)} values; at most {MAX_ARRAY_ENTRIES:,} are read."
        )
    if item_type in _SCALARS:
        fmt = _SCALARS[item_type]
        end = position + count * struct.calcsize(fmt)
        if end > len(blob):
            raise struct.error("array past the end of the file")
        if count > SHORT_ARRAY:
            return _Counted(count, None), end
        return list(struct.unpack_from(f"<{count}{fmt[1]}", blob, position)), end
    if item_type == _STRING:  # a vocabulary or merge table
        string_bytes = 0
        for _ in range(count):
            (length,) = _LENGTH.unpack_from(blob, position)
            string_bytes += length
            position += 8 + length
        if position > len(blob):
            raise struct.error("array past the end of the file")
        return _Counted(count, string_bytes), position
    raise CheckpointError(f"{where} is an array of values of type {item_type}, which is not read.")


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
    if shape[-1] % block:
        raise CheckpointError(
            f"Tensor {name}: rows of {brief_count(shape[-1])} values do not fill {block}-value blocks."
        )
    return ggml_type.name, math.prod(shape) // block * block_bytes
