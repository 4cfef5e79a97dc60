"""`python -m explorer.bench --experiments`: a researcher's own experiment, on SmolLM2 (a random-init
checkpoint of its shape when it is not installed), float32, through `explorer.tools.bench.against`:

- `run_batch` of 32 prompts × 64 tokens against a loop of 32 single runs, and against transformers'
  batched SDPA forward of the same ids (one batch of 32; ours in batches of 16);
- an edited run against the plain run of its 64 tokens: steering (a stream edit at every position), a
  head's output zeroed, one attention cell knocked out;
- `ex.cache` of the stream entering the middle layer at every position of 1,000 texts of 64 tokens, in a
  fresh process after one batch's warm-up (the runtime's buffers, some 50 MiB, are the process's): its
  time, and the memory it holds (peak resident size while it runs, less before, sampled every 5 ms),
  against the arrays it returns.

Writes `bench/experiments-DEVICE.*`.

    python -m explorer.bench --experiments --threads 2
"""

from __future__ import annotations

import threading
import time

from explorer.tools.bench.against import Measure, Suite

N_TOKENS = 64
PROMPTS = 32
CACHE_TEXTS = 1000
LOOP, HF_BATCH, ONE = "32 single runs", "transformers batched SDPA", "one run"


def prompts(ex, count: int = PROMPTS, n_tokens: int = N_TOKENS) -> list[list[int]]:
    """`count` different spans of `n_tokens` token ids of the bench's English text."""
    from explorer.tools.bench.worker import real_text

    ids = ex.tokenizer.encode(real_text()).ids
    step = max(1, (len(ids) - n_tokens) // count)
    return [ids[i * step : i * step + n_tokens] for i in range(count)]


def baselines(run, text: str) -> dict:
    import torch

    from explorer.tools.bench.worker import hf_model

    ex = run.explorer
    batch = prompts(ex)
    hf = hf_model(ex.path, "sdpa", str(ex.device))
    ids = torch.tensor(batch, device=ex.device)
    one = batch[0]

    def hf_forward():
        with torch.inference_mode():
            hf(ids)

    return {
        LOOP: lambda: [ex.run(ids=row) for row in batch],
        HF_BATCH: hf_forward,
        ONE: lambda: ex.run(ids=one),
    }


def measures(run) -> list[Measure]:
    from explorer import Edit

    ex, c = run.explorer, run.config
    batch = prompts(ex)
    one, middle = batch[0], c.n_layers // 2
    direction = ex.steering_vector([ex.tokenizer.decode(batch[1])], [ex.tokenizer.decode(batch[2])], middle)
    steer = [Edit("resid", middle, op="add", value=4.0 * direction)]
    zero = [Edit("z", middle, head=0, op="scale", value=0.0)]
    knockout = [Edit("scores", middle, head=0, position=(N_TOKENS - 1, 1), op="block")]
    return [
        Measure(
            "run_batch, 32 × 64",
            "`ex.run_batch(ids, batch_size=16)`: a Run each, two padded forwards",
            lambda: ex.run_batch(batch, batch_size=16),
            LOOP,
            0.667,  # at least 1.5× faster
        ),
        Measure(
            "run_batch against transformers",
            "the same, against transformers' SDPA forward of the 32 rows at once",
            lambda: ex.run_batch(batch, batch_size=16),
            HF_BATCH,
            1.2,
        ),
        Measure(
            "edited run: steering",
            "a stream edit at every position",
            lambda: ex.run(ids=one, edits=steer),
            ONE,
            1.1,
        ),
        Measure("edited run: a head zeroed", "z scaled by 0", lambda: ex.run(ids=one, edits=zero), ONE, 1.1),
        Measure(
            "edited run: knockout",
            "one cell blocked: that layer's SDPA takes a mask",
            lambda: ex.run(ids=one, edits=knockout),
            ONE,
            1.1,
        ),
    ]


SUITE = Suite("experiments", "Your own experiment: batches, edits, cached activations", baselines, measures)


def cache_memory(ex) -> dict:
    """`ex.cache` of the middle layer's stream at every position of `CACHE_TEXTS` texts: seconds, the
    arrays' bytes, and the peak resident memory above the start while it ran (sampled)."""
    texts = prompts(ex, CACHE_TEXTS)
    layer = ex.config.n_layers // 2
    ex.cache(texts[:16], [("resid", layer)], progress=False)  # the runtime's own buffers, once a process
    before, peak, done = _resident(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _resident())
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    arrays = ex.cache(texts, [("resid", layer)], positions=list(range(N_TOKENS)), progress=False)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    returned = sum(array.nbytes for array in arrays.values())
    held = max(peak[0], _resident()) - before
    return {
        "texts": len(texts),
        "layer": layer,
        "seconds": seconds,
        "returned_bytes": returned,
        "held_bytes": held,
    }


def _resident() -> int:
    """This process's resident memory in bytes (Linux)."""
    import os

    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main(args) -> dict:
    import json
    import subprocess
    import sys

    from explorer.loading.catalog import smollm2_gguf
    from explorer.tools.bench import against

    results = against.main(SUITE, args)
    path = smollm2_gguf()
    if path is None:
        return results
    # in a process of its own, whose resident memory before the call is the model's alone
    command = [
        sys.executable,
        "-m",
        "explorer.tools.bench.experiments",
        str(path),
        args.device,
        str(args.threads),
    ]
    memory = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    ratio = memory["held_bytes"] / memory["returned_bytes"]
    returned, held = (memory[name] / 2**20 for name in ("returned_bytes", "held_bytes"))
    line = (
        f"\n`ex.cache` of the stream entering layer {memory['layer']} at every position of "
        f"{memory['texts']:,} texts of {N_TOKENS} tokens, in a fresh process after one batch's warm-up: "
        f"{memory['seconds']:.1f} s; it returned {returned:.0f} MiB and held {held:.0f} MiB at its peak "
        f"above the start, {ratio:.2f}× (the target: at most 1.25×).\n"
    )
    with open((args.out / f"experiments-{args.device}").with_suffix(".md"), "a") as md:
        md.write(line)
    print(line)
    results["cache"] = {**memory, "ratio": ratio}
    return results


if __name__ == "__main__":  # the cache's memory, measured in a fresh process: path device threads
    import json
    import sys

    import torch

    import explorer

    torch.set_num_threads(int(sys.argv[3]))
    print(json.dumps(cache_memory(explorer.load(sys.argv[1], device=sys.argv[2]))))
