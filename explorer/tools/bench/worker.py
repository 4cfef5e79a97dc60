"""One benchmark configuration, measured alone in a fresh process (started by `python -m explorer.bench`).

    python -m explorer.tools.bench.worker CONTENDER CHECKPOINT_DIR N_TOKENS [--device D --threads T ...]

prints one JSON line: every timed call's seconds, their median, the peak extra memory, and the token
the contender predicts after the prompt (the same for every contender: they all hold the same weights).

Contenders (each a setup that loads the model untimed and returns the call to time):
  first_view    ours: the fast SDPA forward, the top next tokens and the eager rerun of one layer
  switch        ours: the eager rerun of another layer from a run already made (no forward)
  hf_eager      transformers, attn_implementation="eager", model(ids, output_attentions=True)
  hf_sdpa       transformers, attn_implementation="sdpa", model(ids): logits at every position
  hf_sdpa_last  the same with logits_to_keep=1: only the next-token logits, as our first view
  tl            TransformerLens 4.x: a TransformerBridge around its own HF model, run_with_cache(ids)

Peak extra memory: after set-up and warm-up, freed heap is handed back to the OS (malloc_trim) and
the resident set size (RSS) is the baseline; the kernel's high-water mark (VmHWM) is reset to it
(`/proc/self/clear_refs` ← 5), and after the timed calls VmHWM − baseline is the peak extra memory.
The kernel tracks that peak on every page fault, so no short spike is missed the way a sampling
thread would miss it. On CUDA it is the allocator's peak above the memory allocated at the baseline.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import itertools
import json
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from explorer.tools.bench.common import prompt_ids, token_name

FIRST_LAYER = 0  # the layer a first view shows; a switch then visits the others in turn


def real_text() -> str:
    """English for a real model (a GGUF file): Hamlet's soliloquy, written as often as it takes."""
    from explorer.app.examples import LONG_PASSAGE

    return "\n\n".join([LONG_PASSAGE] * 16)


def prompt(checkpoint: Path, n_tokens: int) -> tuple[list[int], str]:
    """The N token ids every contender runs, and the text that our `ex.run(text, max_tokens=N)` turns
    into exactly those ids: random ids spelled by the word-level tokenizer for the random model, the
    first N tokens of `real_text()` in the file's own tokenizer for a GGUF file."""
    if checkpoint.suffix == ".gguf":
        from explorer.loading.gguf import config_from_header, read_tokenizer
        from explorer.loading.gguf_header import read_header

        header = read_header(checkpoint)
        model_type = config_from_header(header, checkpoint.name).model_type
        text = real_text()
        ids = read_tokenizer(checkpoint, model_type, header).encode(text).ids[:n_tokens]
        if len(ids) < n_tokens:
            raise ValueError(f"the benchmark's text has {len(ids)} tokens, fewer than {n_tokens}")
        return ids, text
    vocab_size = json.loads((checkpoint / "config.json").read_text())["vocab_size"]
    ids = prompt_ids(vocab_size, n_tokens)
    return ids, " ".join(token_name(i) for i in ids)


@dataclass
class Contender:
    step: Callable[[], Any]  # the call that is timed; its result is dropped before the next one
    next_token: Callable[[Any], int | None]  # the predicted token id, read from a step's result


def first_view(path: Path, ids: list[int], device: str) -> Contender:
    import explorer

    ex = explorer.load(path, device=device)
    text = prompt(path, len(ids))[1]

    def step():
        run = ex.run(text, max_tokens=len(ids))
        run.top_next_tokens()
        run.attention(FIRST_LAYER)
        return run

    return Contender(step, lambda run: int(run.next_token_probs().argmax()))


def switch(path: Path, ids: list[int], device: str) -> Contender:
    import explorer

    ex = explorer.load(path, device=device)
    run = ex.run(prompt(path, len(ids))[1], max_tokens=len(ids))
    run.attention(FIRST_LAYER)
    others = itertools.cycle([layer for layer in range(ex.config.n_layers) if layer != FIRST_LAYER])
    return Contender(
        lambda: run.attention(next(others), remember=False),  # never served from the run's cache
        lambda _: int(run.next_token_probs().argmax()),
    )


def hf_model(path: Path, attn_implementation: str, device: str):
    from transformers import AutoModelForCausalLM

    where = dict(pretrained_model_name_or_path=path.parent, gguf_file=path.name) if path.is_file() else {}
    model = AutoModelForCausalLM.from_pretrained(
        **(where or dict(pretrained_model_name_or_path=path)),
        attn_implementation=attn_implementation,
        dtype=torch.float32,
    )
    return model.to(device).eval()


def _hf_next_token(out) -> int:
    return int(out.logits[0, -1].argmax())


def hf_eager(path: Path, ids: list[int], device: str) -> Contender:
    model, x = hf_model(path, "eager", device), torch.tensor([ids], device=device)
    return Contender(lambda: model(x, output_attentions=True), _hf_next_token)


def hf_sdpa(path: Path, ids: list[int], device: str) -> Contender:
    model, x = hf_model(path, "sdpa", device), torch.tensor([ids], device=device)
    return Contender(lambda: model(x), _hf_next_token)


def hf_sdpa_last(path: Path, ids: list[int], device: str) -> Contender:
    model, x = hf_model(path, "sdpa", device), torch.tensor([ids], device=device)
    return Contender(lambda: model(x, logits_to_keep=1), _hf_next_token)


def tl(path: Path, ids: list[int], device: str) -> Contender:
    from transformer_lens.model_bridge.sources import build_bridge_from_module

    model = hf_model(path, "eager", device)  # its own copy: the bridge rewires the model in place
    bridge = build_bridge_from_module(model, model.config.architectures[0], hf_config=model.config)
    x = torch.tensor([ids], device=device)
    return Contender(lambda: bridge.run_with_cache(x), lambda out: int(out[0][0, -1].argmax()))


CONTENDERS: dict[str, Callable[[Path, list[int], str], Contender]] = {
    "first_view": first_view,
    "switch": switch,
    "hf_eager": hf_eager,
    "hf_sdpa": hf_sdpa,
    "hf_sdpa_last": hf_sdpa_last,
    "tl": tl,
}


class PeakMemory:
    """Peak memory above a baseline: resident set size on CPU, the allocator's peak on CUDA."""

    def __init__(self, device: str):
        self.cuda = torch.device(device).type == "cuda"

    def reset(self) -> None:
        gc.collect()
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.baseline = torch.cuda.memory_allocated()
            return
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        self.baseline = _proc_status_bytes("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")

    def peak_extra(self) -> int:
        peak = torch.cuda.max_memory_allocated() if self.cuda else _proc_status_bytes("VmHWM")
        return peak - self.baseline


def _proc_status_bytes(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    return int(match.group(1)) * 1024


def measure(contender: Contender, device: str, warmups: int, repeats: int) -> dict[str, Any]:
    """Warm up, then time `repeats` calls; memory is measured over the timed calls."""
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else lambda: None
    for _ in range(warmups):
        with torch.inference_mode():
            contender.step()
    memory = PeakMemory(device)
    memory.reset()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.inference_mode():
            result = contender.step()
        sync()
        seconds.append(time.perf_counter() - start)
        next_token = contender.next_token(result)
        del result
        gc.collect()  # nothing of this call lingers into the next one
    return {
        "seconds": statistics.median(seconds),
        "all_seconds": seconds,
        "peak_extra_bytes": memory.peak_extra(),
        "next_token": next_token,
    }


def main(argv: list[str] | None = None, contenders: dict[str, Callable] = CONTENDERS) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("contender", choices=contenders)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("n_tokens", type=int)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    ids = prompt(args.checkpoint, args.n_tokens)[0]
    contender = contenders[args.contender](args.checkpoint, ids, args.device)
    print(json.dumps(measure(contender, args.device, args.warmups, args.repeats)))


if __name__ == "__main__":
    main()
