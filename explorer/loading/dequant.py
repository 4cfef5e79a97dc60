"""GGUF tensor data to float32 by llama.cpp's own dequantizer (gguf-py), a large run of blocks at a time.

gguf-py's `gguf.quants.dequantize` applies each type's `dequantize_blocks` (llama.cpp's reference, in
numpy) over groups of 16 rows and concatenates the groups into a new array: for Gemma-3-270M's
262,144 × 640 embedding that is 16,384 groups of Python overhead, and the float32 result held twice at
the end. Here the same `dequantize_blocks` of the same class runs over runs of `CHUNK_VALUES` values,
each written straight into one float32 tensor allocated once: the same values, computed by the same
code, in less time and with one copy of the tensor in memory (docs/performance.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

CHUNK_VALUES = 1 << 16  # values dequantized at once: big enough to amortise a call, small enough for cache


def dequantize(path: Path, type_name: str, start: int, nbytes: int, shape: tuple[int, ...]) -> torch.Tensor:
    """The tensor of `shape` whose data are the `nbytes` at `start` in `path`, stored as `type_name` (a
    ggml type), as float32.  # -> shape"""
    from gguf import quants

    raw = np.fromfile(path, dtype=np.uint8, count=nbytes, offset=start)
    if type_name == "F32":
        return torch.from_numpy(raw.view(np.float32).reshape(shape).copy())
    if type_name == "F16":
        return torch.from_numpy(raw.view(np.float16).astype(np.float32).reshape(shape))
    kind = getattr(quants, type_name)  # gguf-py's class of the type: Q8_0, Q4_K, BF16, …
    blocks = raw.reshape(-1, kind.type_size)  # [n_blocks, bytes a block]
    out = torch.empty(blocks.shape[0], kind.block_size)  # [n_blocks, values a block]
    values = out.numpy()
    step = max(1, CHUNK_VALUES // kind.block_size)
    for first in range(0, blocks.shape[0], step):
        values[first : first + step] = kind.dequantize_blocks(blocks[first : first + step])
    return out.view(shape)
