"""Our model's weights for a model nnsight runs. Run locally, they are the HF model's own tensors (no
copy: `loading.weights.build_model` wraps its state dict). Run on NDIF, they are fetched as saved
tensors of a trace, each part the first time something reads it: the final norm and the LM head at
load; the embedding when first read (the LM head itself, where they are tied); of a block, its
attention (its norms before and after it, q/k/v/o and the QK-norms: what a layer view reads) apart from
its MLP (with the MLP's own norms: what a rerun of the block reads too). Blocks' parts are kept while
they fit a budget, the least recently read given back first. Float32, as our engine computes."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from functools import partial

import torch
from torch import nn

from explorer.engine.config import ModelConfig
from explorer.engine.model import Block, Transformer

# (layer, or None for the decoder's own modules, module names) -> their parameters as "name.param"
Fetch = Callable[[int | None, list[str]], dict[str, torch.Tensor]]
DEFAULT_BLOCK_BUDGET_BYTES = 8 * 2**30
PARTS = {
    "attention": ("input_layernorm", "self_attn", "post_attention_layernorm"),
    "mlp": ("pre_feedforward_layernorm", "mlp", "post_feedforward_layernorm"),
}
PART_OF = {name: part for part, names in PARTS.items() for name in names}


class FetchedBlock(Block):
    """A block built without weights, each part of it given them when one of its modules is first
    read (through `on_read`, set by `FetchedBlocks`)."""

    def __getattr__(self, name: str):
        on_read = self.__dict__.get("on_read")
        if on_read is not None and name in PART_OF:
            on_read(PART_OF[name])
        return super().__getattr__(name)


class FetchedBlocks(nn.ModuleList):
    """The model's blocks, their parts fetched when first read and kept within `max_bytes` (the least
    recently read part drops its weights first)."""

    def __init__(self, config: ModelConfig, fetch: Fetch, max_bytes: int = DEFAULT_BLOCK_BUDGET_BYTES):
        with torch.device("meta"):
            blocks = [FetchedBlock(config, layer) for layer in range(config.n_layers)]
        super().__init__(blocks)
        self.fetch, self.max_bytes = fetch, max_bytes
        self.held: OrderedDict[tuple[int, str], int] = OrderedDict()  # (layer, part) -> bytes
        self.fetches = 0  # parts fetched so far (a part dropped and read again counts twice)
        self.device = torch.device("cpu")  # where fetched weights go: where the model was last moved
        for layer, block in enumerate(blocks):
            block.__dict__["on_read"] = partial(self.read, layer)

    def modules_of(self, layer: int, part: str) -> dict[str, nn.Module]:
        block = self._modules[str(layer)]
        return {name: block._modules[name] for name in PARTS[part] if name in block._modules}

    def read(self, layer: int, part: str) -> None:
        """Fetch a block's part unless it is held; mark it the most recently read."""
        key = (layer, part)
        if key in self.held:
            self.held.move_to_end(key)
            return
        modules = self.modules_of(layer, part)
        state = self.fetch(layer, list(modules))
        for name, module in modules.items():
            prefix = f"{name}."
            own = {k.removeprefix(prefix): v for k, v in state.items() if k.startswith(prefix)}
            module.load_state_dict({k: v.to(self.device, torch.float32) for k, v in own.items()}, assign=True)
            module.requires_grad_(False)
        self.fetches += 1
        self.held[key] = sum(p.numel() * p.element_size() for m in modules.values() for p in m.parameters())
        # past the budget, the least recently read parts of other blocks go (a block's own parts are
        # read together in one pass through it)
        others = [held for held in self.held if held[0] != layer]
        while others and sum(self.held.values()) > self.max_bytes:
            dropped = others.pop(0)
            del self.held[dropped]
            for module in self.modules_of(*dropped).values():
                _drop(module)

    def _apply(self, fn, recurse=True):
        """Moves or casts the parts that hold weights; the others have none to move yet, and will be
        fetched where the move took the rest."""
        self.device = fn(torch.empty(0, device=self.device)).device
        for layer, part in self.held:
            for module in self.modules_of(layer, part).values():
                module._apply(fn, recurse)
        return self


def _drop(module: nn.Module) -> None:
    """Give back a module's weights: each parameter replaced by an empty one (a reading that holds the
    old tensors keeps them until it ends)."""
    for sub in module.modules():
        for name, parameter in list(sub._parameters.items()):
            if parameter is not None:
                sub._parameters[name] = nn.Parameter(torch.empty_like(parameter, device="meta"), False)


class FetchedTransformer(Transformer):
    """Our model of a remote one: its embedding fetched when first read (`on_embedding`)."""

    def _apply(self, fn, recurse=True):
        """Moves or casts what holds weights and the buffers; an embedding not yet fetched stays empty."""
        for name, module in self._modules.items():
            if name == "layers" or not any(p.is_meta for p in module.parameters()):
                module._apply(fn, recurse)
        for name, buffer in self._buffers.items():
            if buffer is not None:
                self._buffers[name] = fn(buffer)
        return self

    def __getattr__(self, name: str):
        on_embedding = self.__dict__.get("on_embedding")
        if name == "embed_tokens" and on_embedding is not None:
            self.__dict__["on_embedding"] = None
            on_embedding()
        return super().__getattr__(name)


def remote_fetch(lm, decoder: str, remote, tracing) -> Fetch:
    """Parameters of modules of block `layer` (or, with None, of the decoder itself: `embed_tokens`,
    `norm`; `lm_head` beside it), as saved tensors of a trace of one token that stops at once. The body
    is sent to NDIF: it calls nothing of ours. `tracing`: the model's lock, held through the trace."""

    def fetch(layer: int | None, names: list[str]) -> dict[str, torch.Tensor]:
        import nnsight

        with tracing, lm.trace(torch.zeros(1, 1, dtype=torch.long), use_cache=False, remote=remote) as tracer:
            owner = getattr(lm, decoder) if layer is None else getattr(lm, decoder).layers[layer]
            saved = nnsight.save(
                {
                    f"{name}.{parameter}": value
                    for name in names
                    for parameter, value in (lm if name == "lm_head" else owner)
                    .__getattr__(name)
                    .named_parameters()
                }
            )
            tracer.stop()
        return {name: value.detach() for name, value in saved.items()}

    return fetch


def fetched_model(config: ModelConfig, fetch: Fetch, max_block_bytes: int) -> Transformer:
    """Our model of a remote one: its final norm and LM head fetched now, the rest when first read."""
    with torch.device("meta"):
        model = FetchedTransformer(config)
    model.layers = FetchedBlocks(config, fetch, max_block_bytes)
    head = ["embed_tokens"] if config.tie_word_embeddings else ["lm_head"]
    state = fetch(None, ["norm", *head])
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False, assign=True)
    if config.tie_word_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    else:
        model.__dict__["on_embedding"] = partial(_fetch_embedding, model, fetch)
    return model.eval().requires_grad_(False)


def _fetch_embedding(model: Transformer, fetch: Fetch) -> None:
    state = fetch(None, ["embed_tokens"])
    device = model.norm.weight.device
    weights = {k.removeprefix("embed_tokens."): v.to(device, torch.float32) for k, v in state.items()}
    model._modules["embed_tokens"].load_state_dict(weights, assign=True)
    model._modules["embed_tokens"].requires_grad_(False)
