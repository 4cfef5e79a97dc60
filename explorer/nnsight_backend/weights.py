"""Our model's weights for a model nnsight runs. Run locally, they are the HF model's own tensors (no
copy: `loading.weights.build_model` wraps its state dict). Run on NDIF, they are fetched as saved
tensors of one trace: the embedding, the final norm and the LM head at load, and each block the first
time something reads it (`FetchedBlocks`), kept while they fit a budget (the least recently read block
is given back first). Float32, as our engine computes."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import torch
from torch import nn

from explorer.engine.config import ModelConfig
from explorer.engine.model import Block, Transformer
from explorer.nnsight_backend.families import Family, at

Fetch = Callable[[str], dict[str, torch.Tensor]]  # a module path -> its parameters, by name
DEFAULT_BLOCK_BUDGET_BYTES = 8 * 2**30


def nbytes(module: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


class FetchedBlocks(nn.ModuleList):
    """The model's blocks, each built without weights (on the meta device) and given them the first
    time it is read; past `max_bytes` of blocks held, the least recently read one drops its weights."""

    def __init__(self, config: ModelConfig, fetch: Fetch, max_bytes: int = DEFAULT_BLOCK_BUDGET_BYTES):
        with torch.device("meta"):
            blocks = [Block(config, layer) for layer in range(config.n_layers)]
        super().__init__(blocks)
        self.fetch, self.max_bytes = fetch, max_bytes
        self.held: OrderedDict[int, int] = OrderedDict()  # layer -> bytes, least recently read first
        self.fetches = 0  # blocks fetched so far (a block dropped and read again counts twice)
        self.device = torch.device("cpu")  # where fetched weights go: where the model was last moved

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        layer = range(len(self))[index]
        block = super().__getitem__(layer)
        if layer in self.held:
            self.held.move_to_end(layer)
            return block
        state = self.fetch(f"layers.{layer}")
        block.load_state_dict({k: v.to(self.device, torch.float32) for k, v in state.items()}, assign=True)
        block.requires_grad_(False)
        self.fetches += 1
        self.held[layer] = nbytes(block)
        while len(self.held) > 1 and sum(self.held.values()) > self.max_bytes:
            dropped, _ = self.held.popitem(last=False)
            super().__getitem__(dropped).to_empty(device="meta")
        return block

    def __iter__(self):
        return (self[layer] for layer in range(len(self)))

    def _apply(self, fn, recurse=True):
        """Moves or casts the blocks that hold weights; the others have none to move yet, and will be
        fetched where the move took the rest."""
        self.device = fn(torch.empty(0, device=self.device)).device
        for layer in self.held:
            super().__getitem__(layer)._apply(fn, recurse)
        return self


def remote_fetch(lm, family: Family, remote) -> Fetch:
    """Parameters of a module of the decoder (`layers.3`, `norm`, ...; `lm_head` beside it), as saved
    tensors of one trace of a single token that stops at once."""

    def fetch(path: str) -> dict[str, torch.Tensor]:
        import nnsight

        with lm.trace(torch.zeros(1, 1, dtype=torch.long), use_cache=False, remote=remote) as tracer:
            module = at(lm, path) if path == "lm_head" else at(at(lm, family.decoder), path)
            saved = nnsight.save({name: p for name, p in module.named_parameters()})
            tracer.stop()
        return {name: value.detach() for name, value in saved.items()}

    return fetch


def fetched_model(config: ModelConfig, fetch: Fetch, max_block_bytes: int) -> Transformer:
    """Our model, its embedding, final norm and LM head fetched now, its blocks when first read."""
    with torch.device("meta"):
        model = Transformer(config)
    model.layers = FetchedBlocks(config, fetch, max_block_bytes)
    state = {f"embed_tokens.{k}": v for k, v in fetch("embed_tokens").items()}
    state |= {f"norm.{k}": v for k, v in fetch("norm").items()}
    if not config.tie_word_embeddings:
        state |= {f"lm_head.{k}": v for k, v in fetch("lm_head").items()}
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False, assign=True)
    if config.tie_word_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    return model.eval().requires_grad_(False)
