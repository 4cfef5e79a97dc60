"""The checkpoints `python -m explorer.stress` loads: seeded random models with the bundled tokenizer,
and hostile checkpoints built from them (configs, shards, tokenizers and a GGUF that must be refused)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from explorer.engine.config import ModelConfig
from explorer.engine.model import Transformer
from explorer.loading.checkpoints import BUNDLED_MODEL
from explorer.loading.folders import save_checkpoint


def make_checkpoints(
    folder: Path, context: int, wide_mlp: int = 6144, added: int = 400_000, gguf_tokens: int = 10_000_000
) -> dict[str, Path]:
    """Seeded random models with the bundled tokenizer, and hostile checkpoints built from them."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(BUNDLED_MODEL / "tokenizer.json"))
    shapes = {  # long: 8 heads at the app's token limit; wide: 412 MB of float32 weights each
        "long": dict(hidden_size=256, n_layers=4, n_heads=8, n_kv_heads=2, intermediate_size=768),
        "wide": dict(hidden_size=1024, n_layers=4, n_heads=8, n_kv_heads=2, intermediate_size=wide_mlp),
    }
    paths = {}
    for name, shape in shapes.items():
        config = ModelConfig(vocab_size=tokenizer.get_vocab_size(), max_position_embeddings=context, **shape)
        model = Transformer(config)
        model.init_weights(generator=torch.Generator().manual_seed(0))
        save_checkpoint(model, tokenizer, folder / name)
        paths[name] = folder / name
    for copy in range(1, 6):  # the same weights under other names: separate models, as far as the app knows
        target = folder / f"wide-{copy}"
        target.mkdir()
        for file in paths["wide"].iterdir():
            os.link(file, target / file.name)
        paths[f"wide-{copy}"] = target
    config = json.loads((paths["long"] / "config.json").read_text())
    hostile = {
        "deep": dict(num_hidden_layers=10**6),
        "fractional": dict(num_hidden_layers=4.5),
        "foreign": dict(model_type="secret-value-42"),
    }
    for name, change in (*hostile.items(), ("pickled", {}), ("escaping", {})):
        target = folder / name
        target.mkdir()
        (target / "config.json").write_text(json.dumps({**config, **change}))
        (target / "tokenizer.json").write_bytes((paths["long"] / "tokenizer.json").read_bytes())
        if name == "pickled":
            torch.save({"weights": torch.zeros(4)}, target / "model.safetensors")
        elif name == "escaping":
            os.link(paths["long"] / "model.safetensors", folder / "outside.safetensors")
            index = {"weight_map": {"model.embed_tokens.weight": "../outside.safetensors"}}
            (target / "model.safetensors.index.json").write_text(json.dumps(index))
        else:
            os.link(paths["long"] / "model.safetensors", target / "model.safetensors")
        paths[name] = target
    paths |= hostile_tokenizers(folder, paths["long"], added)
    paths["tokens.gguf"] = token_list_gguf(folder / "tokens.gguf", gguf_tokens)
    for i in range(5):  # small models to load from fresh sessions of one address
        target = folder / f"fresh-{i}"
        target.mkdir()
        for file in paths["long"].iterdir():
            os.link(file, target / file.name)
        paths[f"fresh-{i}"] = target
    return paths


def hostile_tokenizers(folder: Path, model: Path, added: int) -> dict[str, Path]:
    """The `model` with a tokenizer.json of `added` added tokens of ~33 characters (400,000: 63 MB),
    and with one whose added token's id is past the model's vocabulary."""
    vocab_size = json.loads((model / "config.json").read_text())["vocab_size"]
    base = json.loads((model / "tokenizer.json").read_text())
    paths = {}
    for name, tokens in (
        ("added-tokens", [(4000 + i % 90, f"<tok_{i}_" + "x" * 21 + ">") for i in range(added)]),
        ("past-vocab", [(vocab_size + 7, "<past-the-vocabulary>")]),
    ):
        target = folder / name
        target.mkdir()
        for file in model.iterdir():
            if file.name != "tokenizer.json":
                os.link(file, target / file.name)
        special = dict(single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)
        extra = [dict(id=i, content=text, **special) for i, text in tokens]
        (target / "tokenizer.json").write_text(
            json.dumps({**base, "added_tokens": base["added_tokens"] + extra})
        )
        paths[name] = target
    return paths


def token_list_gguf(path: Path, count: int) -> Path:
    """A llama GGUF whose token list has `count` entries for an embedding of 263 rows (10⁷: 159 MB)."""
    from gguf import GGUFWriter

    from explorer.loading.gguf import expected_tensors

    config = ModelConfig(
        vocab_size=263, hidden_size=64, n_layers=1, n_heads=4, n_kv_heads=2, intermediate_size=128
    )
    writer = GGUFWriter(str(path), "llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.n_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.n_heads)
    writer.add_head_count_kv(config.n_kv_heads)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"t{i}" for i in range(count)])
    writer.add_token_merges(["t 0"])
    generator = np.random.default_rng(0)
    for name, shape in expected_tensors(config).items():
        writer.add_tensor(name, generator.standard_normal(shape).astype(np.float32) * 0.02)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
