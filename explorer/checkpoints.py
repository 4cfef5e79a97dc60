"""Load a checkpoint: the bundled model, a Hugging Face-layout directory, or a hub id.

Weights come from safetensors only (a single file or shards behind `model.safetensors.index.json`);
pickled weights are refused, never unpickled, and no remote code is ever run. Every way loading can
fail ends in one `CheckpointError` whose message says what to do.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from explorer.config import ModelConfig, UnsupportedConfigError, brief
from explorer.model import Transformer
from explorer.rope import config_inverse_frequencies

ASSETS = Path(__file__).resolve().parent.parent / "assets"
BUNDLED_MODEL = ASSETS / "shakespeare-gqa"
PICKLED_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
INDEX = "model.safetensors.index.json"
# The most bytes read of each JSON file (a model's config.json is ~1 KB, an index ~30 KB, a tokenizer
# of a 256k vocabulary ~35 MB) and of a safetensors header (the safetensors library's own limit).
JSON_MAX_BYTES = {"config.json": 1 << 20, INDEX: 16 << 20}
TOKENIZER_MAX_BYTES = 64 << 20
SAFETENSORS_HEADER_MAX_BYTES = 100_000_000
FLOAT_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}  # safetensors dtype -> bytes per value


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
    try:
        path = Path(source).expanduser()
        if path.is_dir() or (path.is_file() and path.suffix.lower() == ".gguf"):
            return path
        exists = path.exists()
    except (OSError, RuntimeError) as error:  # a name too long, a forbidden folder, an unknown ~user
        reason = os.strerror(error.errno) if getattr(error, "errno", None) else str(error)
        raise CheckpointError(f"{brief(source, 120)} cannot be read as a path ({reason}).") from None
    if exists:
        raise CheckpointError(
            f"{brief(source, 120)} is a file; give a .gguf file or the directory that holds config.json."
        )
    from explorer import hub  # it raises CheckpointError: imported when a hub id is given

    if source.startswith((".", "/", "~")) or not hub.HUB_ID.match(source):
        raise CheckpointError(
            f"No directory {brief(source, 120)}, and it is not a hub id of the form 'org/name'."
        )
    return hub.download(source)


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


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every weight a checkpoint of `config` holds, by HF Llama name, with its shape (a tied head left
    out): what `Transformer(config)` would hold, known from the config alone, nothing built."""
    hidden, inner, vocab = config.hidden_size, config.intermediate_size, config.vocab_size
    q_rows, kv_rows = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,)}
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (vocab, hidden)
    layer = {
        "input_layernorm.weight": (hidden,),
        "self_attn.q_proj.weight": (q_rows, hidden),
        "self_attn.k_proj.weight": (kv_rows, hidden),
        "self_attn.v_proj.weight": (kv_rows, hidden),
        "self_attn.o_proj.weight": (hidden, q_rows),
        "post_attention_layernorm.weight": (hidden,),
        "mlp.gate_proj.weight": (inner, hidden),
        "mlp.up_proj.weight": (inner, hidden),
        "mlp.down_proj.weight": (hidden, inner),
    }
    if config.qkv_bias:
        layer |= {
            "self_attn.q_proj.bias": (q_rows,),
            "self_attn.k_proj.bias": (kv_rows,),
            "self_attn.v_proj.bias": (kv_rows,),
        }
    if config.o_bias:
        layer["self_attn.o_proj.bias"] = (hidden,)
    if config.mlp_bias:
        layer |= {
            "mlp.gate_proj.bias": (inner,),
            "mlp.up_proj.bias": (inner,),
            "mlp.down_proj.bias": (hidden,),
        }
    for i in range(config.n_layers):
        shapes |= {f"model.layers.{i}.{name}": shape for name, shape in layer.items()}
    return shapes


def check_shapes(config: ModelConfig, shapes: dict[str, tuple[int, ...]]) -> None:
    """Refuse weights (by HF name, with shapes) that do not fit `config`: a missing, extra or misshapen
    tensor. The tied head may be present or not; HF's saved `rotary_emb.inv_freq` buffers are ignored."""
    expected = expected_shapes(config)
    given = {k: v for k, v in shapes.items() if not k.endswith("rotary_emb.inv_freq")}
    if config.tie_word_embeddings:
        given.pop("lm_head.weight", None)
    missing, unexpected = sorted(expected.keys() - given.keys()), sorted(given.keys() - expected.keys())
    if missing or unexpected:
        raise CheckpointError(
            "The weights do not fit the config: "
            + (f"missing {_first_five(missing)} " if missing else "")
            + (f"unexpected {_first_five(unexpected)}" if unexpected else "")
        )
    for key, shape in expected.items():
        if tuple(given[key]) != shape:
            raise CheckpointError(f"{key} has shape {tuple(given[key])}, the config implies {shape}.")


def _first_five(names: list[str]) -> str:
    return ", ".join(brief(name, 80) for name in names[:5]) + (" …" if len(names) > 5 else "")


def check_fits(config: ModelConfig, dtype: torch.dtype, max_bytes: float | None) -> None:
    """Refuse, before loading, a model whose weights in `dtype` would pass `max_bytes`."""
    n_parameters = sum(math.prod(shape) for shape in expected_shapes(config).values())
    nbytes = n_parameters * dtype.itemsize
    if max_bytes is not None and nbytes > max_bytes:
        raise CheckpointError(
            f"it has {n_parameters / 1e6:,.0f}M parameters, {nbytes / 1e9:.1f} GB in "
            f"{str(dtype).removeprefix('torch.')}: above the memory budget of {max_bytes / 1e9:g} GB. "
            "Pick a smaller model."
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
    check_shapes(config, {key: tuple(value.shape) for key, value in hf_state.items()})
    with torch.device("meta"):
        model = Transformer(config)
    state = from_hf_state_dict(hf_state)
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=False, assign=True)
    if config.tie_word_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    model.inv_freq = config_inverse_frequencies(config)  # built on meta with the rest; make it real
    return model.eval()


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


def load_checkpoint(
    source: str | Path | None = None, dtype=torch.float32, progress=None, max_bytes: float | None = None
) -> Checkpoint:
    """The model `source` names, on the CPU. `progress(fraction, message)` hears what loading does.
    Everything is checked before a weight is read: the config's sizes, the shard paths, every tensor's
    shape in the safetensors headers, and (if `max_bytes` is given) the weights' size in `dtype`."""
    path = resolve(source)
    if path.is_file():
        from explorer.gguf import load_gguf

        return load_gguf(path, dtype, progress, max_bytes)
    name = "bundled: " + path.name if path == BUNDLED_MODEL else str(source).strip()
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
