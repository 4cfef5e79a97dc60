"""Explorer (a loaded model and its tokenizer) and `load`, which makes one: the entry to the Python API.
It stands above the engine and the loading code: it loads a checkpoint (`explorer.loading`) and runs it
through the engine, which knows neither.

ex = explorer.load()            # the bundled model; or a folder, a .gguf file, a hub id
run = ex.run(text)              # one fast forward -> Run
ex.generate(prompt, ...)        # one token at a time from a KV cache -> Generation
ex.run(text, edits=[Edit("z", 3, head=1, position=-1, op="scale", value=0.0)])   # any tap written
ex.steering_vector(positives, negatives, layer=2)    # a direction to add with Edit("resid", 2, ...)
ex.run_batch(texts, batch_size=16)  # a Run each, one padded forward a batch
ex.cache(texts, taps=[("resid", 2), ("z", 3)], positions=-1)   # {tap: array [T, ...]}, streamed
ex.patch_heads(clean, corrupted, answer, distractor)   # every head patched -> PatchResult
ex.composition_scores()         # Q-, K-, V-composition of every pair of heads -> Composition
ex.patch_nodes(clean, corrupted, answer, distractor, nodes=[("z", 9, 3, -1)])  # exact, per node
ex.attribution_patching(...)    # the same nodes estimated from one backward (AtP, AtP*)
ex.edge_attribution(cleans, corrupteds, answers, distractors)   # EAP-IG -> EdgeAttribution
ex.circuit_metric(clean, corrupted, answer, distractor, edges=e.edges[:k])   # exact
ex.attribution_graph(cleans, corrupteds, answers, distractors)   # per position -> Graph
ex.circuit_scorecard(cleans, corrupteds, answers, distractors, edges=e)   # MIB's CPR and CMD
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from explorer.engine import batch, circuits
from explorer.engine.composition import Composition, composition_scores
from explorer.engine.config import ModelConfig
from explorer.engine.edits import Edit, Edits
from explorer.engine.exact_circuits import CorruptedRuns
from explorer.engine.generate import Generation
from explorer.engine.interventions import Ablation, PatchResult, Progress, patch_heads
from explorer.engine.patch_metrics import METRICS
from explorer.engine.run import Run
from explorer.engine.scorecard import MIB_FRACTIONS, RESAMPLES
from explorer.engine.taps import Taps, recorder
from explorer.engine.tokens import encode, encode_ids
from explorer.loading.checkpoints import Checkpoint, load_checkpoint
from explorer.loading.weights import Fits, within


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Explorer:
    """A model and its tokenizer, ready to run prompts."""

    def __init__(self, checkpoint: Checkpoint, device: torch.device | str | None = None):
        self.name = checkpoint.name
        self.path = checkpoint.path
        self.config: ModelConfig = checkpoint.config
        self.tokenizer = checkpoint.tokenizer
        self.tokenizer_nbytes = checkpoint.tokenizer_bytes  # estimated from what it counts
        self.device = torch.device(device) if device else default_device()
        # read, never trained: a backward asks for the stream's gradients alone, never keeps the weights'
        self.model = checkpoint.model.to(self.device).eval().requires_grad_(False)
        self._composition: Composition | None = None
        # the corrupted runs of the latest circuits' pairs, kept for the next circuit of the same pairs
        self.corrupted_runs = CorruptedRuns()

    @property
    def forward_count(self) -> int:
        """The forwards the model has run (`Transformer.hidden_states`): the app proves a switch adds none."""
        return self.model.forward_count

    @property
    def backend(self) -> str:
        """What runs the model's forwards: "engine" (ours) or "nnsight"."""
        return "nnsight" if hasattr(self.model, "lm") else "engine"

    @property
    def runs_where(self) -> str:
        """Where the model runs, for status lines: "on cpu", "on NDIF (remote, through nnsight)" …"""
        return getattr(self.model, "where", None) or f"on {self.device}"

    @property
    def dtype(self) -> torch.dtype:
        return self.model.norm.weight.dtype  # (the embedding's: a remote model's is fetched when first read)

    @torch.inference_mode()
    def run(
        self,
        text: str | None = None,
        max_tokens: int | None = None,
        ablate: Iterable[tuple[int, int]] = (),
        ablate_mode: str = "zero",
        *,
        ids: Sequence[int] | None = None,
        edits: Sequence[Edit] | None = None,
    ) -> Run:
        """One fast forward over `text`, truncated to the context (or `max_tokens`) if longer: cut to
        `tokens.CHARS_PER_TOKEN` characters per token allowed before it is tokenized, then to the tokens.
        Or over token `ids` as given, never re-tokenized (labelled by the tokenizer), cut likewise.

        `ablate`: (layer, head) pairs whose outputs are zeroed or mean-replaced (`ablate_mode`, see
        `explorer.engine.interventions`); the run remembers it, so its eager reruns apply the same edit.
        `edits`: `Edit`s written on the forward's taps (`explorer.engine.edits`), every one checked before
        it runs; the run remembers them too, so every view of it shows the edited model.
        """
        ablation = Ablation.parse(self.config, ablate, ablate_mode)
        limit = min(max_tokens or self.config.context_length, self.config.context_length)
        if (text is None) == (ids is None):
            raise ValueError("give the run a text or token ids (ids=[...]), not both")
        encoded = (
            encode(self.tokenizer, text, limit)
            if ids is None
            else encode_ids(self.tokenizer, ids, limit, self.config.vocab_size)
        )
        ids = torch.tensor([encoded.ids], device=self.device)  # [1, N]
        n, hidden = ids.shape[1], self.config.hidden_size
        edited = Edits.parse(self.config, edits, n)
        layer_inputs = torch.empty(self.config.n_layers, 1, n, hidden, dtype=self.dtype, device=self.device)
        taps = Taps(heads=ablation.tap if ablation else None).then(Taps(block_input=recorder(layer_inputs)))
        if edited is not None:  # the edits first: the block inputs kept are the edited ones
            taps = edited.taps(range(n)).then(taps)
        start = time.perf_counter()
        final_hidden = self.model.hidden_states(ids, taps=taps)  # [1, N, hidden]
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        return Run(
            self,
            ids=encoded.ids,
            tokens=encoded.tokens,
            layer_inputs=layer_inputs[:, 0],
            final_hidden=final_hidden[0],
            forward_seconds=seconds,
            moved_bytes=getattr(self.model, "last_moved_bytes", 0),
            n_dropped=encoded.n_dropped,
            n_chars_dropped=encoded.n_chars_dropped,
            ablation=ablation,
            edits=edited,
        )

    def run_batch(
        self, items: Sequence, batch_size: int = 16, max_tokens: int | None = None, edits=None
    ) -> list[Run]:
        """A Run for each text or token-id list, in order, as `run` makes it, from one padded forward
        per batch of `batch_size` (`explorer.engine.batch`); `edits` read against each item (a
        negative position from its own end)."""
        return batch.run_batch(self, items, batch_size, max_tokens, edits)

    def cache(self, texts, taps, positions=-1, batch_size: int = 16, max_tokens=None, progress=True):
        """Activations over a dataset, streamed: each tap, ("resid", 10) or ("z", 23) …, at `positions` of
        every text, as float32 arrays {tap: [T, ...]} filled a batch at a time (`engine.batch.cache`)."""
        return batch.cache(self, texts, taps, positions, batch_size, max_tokens, progress)

    @property
    def composition_computed(self) -> bool:
        """Whether `composition_scores` is kept already (asking again costs nothing)."""
        return self._composition is not None

    def composition_scores(self) -> Composition:
        """Q-, K- and V-composition of every earlier head into every later head, from the weights alone
        (Elhage et al. 2021): `.q`, `.k`, `.v` [L, H, L, H], earlier head first, 0 unless the earlier
        layer is before the later one (`explorer.engine.composition`). Computed once, then kept."""
        if self._composition is None:
            self._composition = composition_scores(self.model)
        return self._composition

    def patch_heads(
        self,
        clean: str,
        corrupted: str,
        answer: str,
        distractor: str,
        progress: Progress | None = None,
        max_tokens: int | None = None,
        metrics: tuple[str, ...] = METRICS,
    ) -> PatchResult:
        """Patch each head's output from the clean prompt's run into the corrupted one's, one head at a
        time, and read at the last position logit(answer) − logit(distractor) and each of `metrics`
        (p(answer), KL(clean ‖ patched): `result.readings`; `engine.interventions`).
        `progress(fraction)` is called as the sweep goes; prompts past `max_tokens` are refused."""
        return patch_heads(self, clean, corrupted, answer, distractor, progress, max_tokens, metrics)

    def patch_nodes(
        self, clean, corrupted, answer, distractor=None, nodes=(), metric="logit_diff", edits=None
    ):
        """Each node (`explorer.engine.nodes`: z, q, k, v, resid, mlp at a position or every one) patched
        alone from the clean run into the corrupted one; the metric averaged over the pairs (one pair, or
        lists of prompts, answers, distractors). `edits` (`Edit`s, positions read against each pair)
        change the model every run reads: the clean, the corrupted and each patched one.
        # -> [len(nodes)] float32"""
        return circuits.patch_nodes(self, clean, corrupted, answer, distractor, nodes, metric, edits)

    def attribution_patching(
        self,
        clean,
        corrupted,
        answer,
        distractor=None,
        nodes=(),
        metric="logit_diff",
        qk_fix=False,
        edits=None,
    ):
        """Attribution patching of each node: (a_clean − a_corrupted) · ∂M/∂a at the corrupted run (AtP);
        `qk_fix`: q and k nodes through the exact attention pattern (AtP*); `edits` as `patch_nodes`
        takes them.  # -> [len(nodes)] float32"""
        return circuits.attribution_patching(
            self, clean, corrupted, answer, distractor, nodes, metric, qk_fix, edits
        )

    def edge_attribution(self, clean, corrupted, answers, distractors=None, steps=5, metric="logit_diff"):
        """EAP-IG over a dataset of pairs: every edge upstream -> downstream scored, `.edges` best first
        (`explorer.engine.edges`)."""
        return circuits.edge_attribution(self, clean, corrupted, answers, distractors, steps, metric)

    def attribution_graph(self, clean, corrupted, answers, distractors=None, steps=5, metric="logit_diff"):
        """EAP-IG per token position over pairs of one length: a `Graph` of every positional edge,
        `.pruned()` to what carries most of the influence, `.to_json()` to draw or share
        (`explorer.engine.graph`)."""
        return circuits.attribution_graph(self, clean, corrupted, answers, distractors, steps, metric)

    def circuit_metric(self, clean, corrupted, answer, distractor=None, edges=(), metric="logit_diff"):
        """The metric, exactly, of the clean run where every input reads its upstream's clean write along
        the kept `edges` and its corrupted write along every other edge, averaged over the pairs. An
        edge may name a position at both ends (a `Graph`'s edges): it is kept at that position alone."""
        return circuits.circuit_metric(self, clean, corrupted, answer, distractor, edges, metric)

    def circuit_scorecard(
        self,
        clean,
        corrupted,
        answers,
        distractors=None,
        edges=(),
        metric="logit_diff",
        fractions=MIB_FRACTIONS,
        resamples=RESAMPLES,
    ):
        """MIB's circuit-localisation scores of a ranking of edges (an `edge_attribution`, a `Graph`, or
        edges best first): the faithfulness of the circuit of each kept fraction, measured exactly, its
        CPR and CMD, with 95% intervals by a bootstrap over the pairs (`explorer.engine.scorecard`)."""
        return circuits.circuit_scorecard(
            self, clean, corrupted, answers, distractors, edges, metric, fractions, resamples
        )

    def generate(
        self,
        prompt: str,
        max_new_tokens: int = 32,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int = 0,
        stop_at_eos: bool = True,
        eos_token_id: int | None = None,
        max_tokens: int | None = None,
        edits: Sequence[Edit] | None = None,
    ) -> Generation:
        """New tokens after `prompt`, one step at a time from a KV cache: iterate the Generation for each
        step's token, candidates and attention row [L, H, q+1]; its `run` is the sequence as a Run.
        Temperature 0 is greedy; `eos_token_id` defaults to the config's (see engine.generate); the
        prompt and new tokens together stay within `max_tokens` (default: the model's context).
        `edits` are written on every forward, the prompt's and each new position's (one with no position
        at every new position too; the KV cache keeps edited keys and values)."""
        return Generation(
            self,
            prompt,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
            stop_at_eos=stop_at_eos,
            eos_token_id=eos_token_id,
            max_tokens=max_tokens,
            edits=edits,
        )

    @torch.inference_mode()
    def steering_vector(self, positive: Sequence[str], negative: Sequence[str], layer: int) -> torch.Tensor:
        """A direction in the stream entering `layer` (L: the final norm's input): the mean over the
        positive texts of each one's mean over its positions, less the same over the negative texts;
        add it with `Edit("resid", layer, op="add", value=strength * vector)`.  # [hidden] float32 CPU"""
        last = self.config.n_layers
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= last:
            raise ValueError(f"layer must be an integer in [0, {last}], got {layer!r}")
        means = []
        for side, texts in (("positive", positive), ("negative", negative)):
            if (
                isinstance(texts, str)
                or not texts
                or not all(isinstance(t, str) and t.strip() for t in texts)
            ):
                raise ValueError(f"the {side} texts are a list of at least one text, none empty")
            means.append(torch.stack([self._stream_mean(text, layer) for text in texts]).mean(0))
        return means[0] - means[1]

    def _stream_mean(self, text: str, layer: int) -> torch.Tensor:
        """The stream entering `layer` averaged over the text's positions.  # [hidden] float32 CPU"""
        ids = torch.tensor([encode(self.tokenizer, text, self.config.context_length).ids], device=self.device)
        kept = []
        if layer < self.config.n_layers:
            stream = self.model.hidden_states(ids, layers=range(layer))  # [1, N, hidden]
        else:
            taps = Taps(block_output=lambda at, x: kept.append(x) if at == layer - 1 else None)
            self.model.hidden_states(ids, taps=taps)
            stream = kept[0]
        return stream[0].float().mean(0).cpu()


def load(
    source: str | Path | None = None,
    device: torch.device | str | None = None,
    progress=None,
    max_bytes: float | None = None,
    fits: Fits | None = None,
    backend: str = "engine",
    remote: bool = False,
) -> Explorer:
    """The bundled model (no argument), a local HF-layout directory, a .gguf file, or a hub id
    ("org/name"). `progress(fraction, message)`, if given, hears each stage of loading; a model whose
    float32 weights would pass `max_bytes` is refused before any is read (`fits`, if given, is told
    the model's size instead: `loading.weights.Fits`).

    `backend="nnsight"`: a Hugging Face model run through nnsight (`explorer.nnsight_backend`), in this
    process, or with `remote=True` on NDIF (the key read from NDIF_API_KEY)."""
    if backend not in ("engine", "nnsight"):
        raise ValueError(f"backend is 'engine' or 'nnsight', got {backend!r}")
    if remote and backend != "nnsight":
        raise ValueError("remote=True runs a model on NDIF through nnsight: give backend='nnsight' too")
    fits = fits or within(max_bytes)
    if backend == "nnsight":
        from explorer.nnsight_backend.loader import load_checkpoint as load_traced

        checkpoint = load_traced(source, remote=remote, fits=fits, device=device or default_device())
    else:
        checkpoint = load_checkpoint(source, progress=progress, fits=fits)
    explorer = Explorer(checkpoint, device)
    if progress is not None:
        progress(1.0, f"Loaded {explorer.name} {explorer.runs_where}")
    return explorer
