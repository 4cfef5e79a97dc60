"""Head ablation and head patching reproduce the same interventions made in Hugging Face transformers
with forward pre-hooks on o_proj that edit a head's slice [h·d, (h+1)·d) of its input; an ablated run
keeps every invariant of a plain one; bad requests get clear messages; and on the bundled model an
induction head, ablated, measurably stops copying."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch

import explorer
from explorer import PromptError
from explorer.app import examples
from explorer.engine import interventions
from tests.conftest import HF_CONFIGS, PROMPT, make_hf_checkpoint

ABLATED = [(0, 1), (0, 6), (1, 3), (2, 0), (2, 7)]  # several heads, several layers, both kv groups
# Clean / corrupted pairs of equal length (26 tokens) in the tiny tokenizer, with single-token answers:
# the corrupted prompt differs from the first token, in the middle (" to" -> " or"), or at the last token.
CLEAN = "To be, or not to be, that is the question: whether the"
CORRUPTED = {
    "differ-at-first-token": "Now be, or not to be, that is the question: whether the",
    "differ-mid-prompt": "To be, or not or be, that is the question: whether the",
    "differ-at-last-token": "To be, or not to be, that is the question: whether to",
}
FIRST_DIFFERENCE = {"differ-at-first-token": 0, "differ-mid-prompt": 6, "differ-at-last-token": 25}
ANSWER, DISTRACTOR = " to", " be"


@pytest.fixture(scope="module", params=["llama-untied", "qwen2-bias"])
def hf_pair(request, tmp_path_factory, tiny_tokenizer):
    """A llama with GQA and untied embeddings, a qwen2 with q/k/v biases: HF model and ours, same weights."""
    model_type, overrides = HF_CONFIGS[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    hf_model = make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    return hf_model, explorer.load(directory, device="cpu")


@contextmanager
def o_proj_pre_hooks(hf_model, edits):
    """Edit the input of o_proj (every head's `probs @ v`, concatenated) per layer: {layer: fn(x) -> x}."""
    layers = hf_model.model.layers
    handles = [
        layers[layer].self_attn.o_proj.register_forward_pre_hook(lambda module, args, fn=fn: (fn(args[0]),))
        for layer, fn in edits.items()
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def head_slice(hf_model, head: int) -> slice:
    d = hf_model.config.head_dim
    return slice(head * d, (head + 1) * d)


def hf_ablation_edits(hf_model, heads, mode):
    """Zero, or replace by its mean over positions, each ablated head's slice of o_proj's input."""

    def edit(x, layer):  # x [B, N, H·d]
        x = x.clone()
        for ablated_layer, head in heads:
            if ablated_layer == layer:
                part = head_slice(hf_model, head)
                x[..., part] = 0 if mode == "zero" else x[..., part].mean(dim=1, keepdim=True)
        return x

    return {layer: lambda x, layer=layer: edit(x, layer) for layer in {layer for layer, _ in heads}}


def hf_logits(hf_model, ids, edits=None):
    with torch.no_grad(), o_proj_pre_hooks(hf_model, edits or {}):
        return hf_model(torch.tensor([ids])).logits[0]


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablated_logits_match_transformers_with_o_proj_hooks(hf_pair, mode):
    hf_model, ex = hf_pair
    run = ex.run(PROMPT, ablate=ABLATED, ablate_mode=mode)
    reference = hf_logits(hf_model, run.ids, hf_ablation_edits(hf_model, ABLATED, mode))
    assert (run.logits - reference).abs().max().item() <= 1e-4
    plain = hf_logits(hf_model, run.ids)
    assert (reference - plain).abs().max().item() > 1e-2  # the ablation changes the logits: the test can fail


def test_zero_and_mean_ablation_differ(hf_pair):
    _, ex = hf_pair
    zero, mean = (ex.run(PROMPT, ablate=ABLATED, ablate_mode=mode).logits for mode in ("zero", "mean"))
    assert (zero - mean).abs().max().item() > 1e-2


def test_empty_ablation_is_the_plain_run(hf_pair):
    _, ex = hf_pair
    plain, empty = ex.run(PROMPT), ex.run(PROMPT, ablate=[], ablate_mode="mean")
    assert empty.ablated == () and empty.ablation is None and plain.ablated == ()
    assert torch.equal(plain.logits, empty.logits)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_eager_matches_sdpa_on_an_ablated_run_every_layer(hf_pair, mode):
    _, ex = hf_pair
    run, plain = ex.run(PROMPT, ablate=ABLATED, ablate_mode=mode), ex.run(PROMPT)
    assert run.ablated == tuple(sorted(ABLATED))
    for layer in range(ex.config.n_layers):
        assert (run.attention(layer).output - run.sdpa_output(layer)).abs().max().item() <= 1e-5
        # The edit reaches the eager rerun: each layer here ablates a head, so its output moves.
        assert (run.attention(layer).output - plain.attention(layer).output).abs().max().item() > 1e-3


def test_ablation_leaves_its_own_layers_maps_and_changes_the_later_ones(hf_pair):
    _, ex = hf_pair
    run, plain = ex.run(PROMPT, ablate=[(1, 3)]), ex.run(PROMPT)
    for layer in (0, 1):  # inputs of layers 0 and 1 are untouched by an edit after layer 1's softmax
        assert torch.equal(run.layer_inputs[layer], plain.layer_inputs[layer])
        torch.testing.assert_close(run.attention(layer).probs, plain.attention(layer).probs)
    assert (run.attention(2).probs - plain.attention(2).probs).abs().max().item() > 1e-4


def hf_patching_reference(hf_model, clean_ids, corrupted_ids, answer_id, distractor_id):
    """Every head patched in turn, in transformers: the clean run's o_proj inputs captured by a pre-hook,
    then the corrupted run with one head's slice of o_proj's input replaced by the clean one. Each
    metric's (clean, corrupted, patched [L, H]): the logit difference, p(answer), KL(clean ‖ run)."""
    config = hf_model.config
    captured = {}
    capture = {
        layer: lambda x, layer=layer: captured.__setitem__(layer, x.clone()) or x
        for layer in range(config.num_hidden_layers)
    }
    clean_logits = hf_logits(hf_model, clean_ids, capture)[-1]
    clean_log = clean_logits.log_softmax(-1)

    def read(logits):  # the last position's logits -> each metric
        log = logits[-1].log_softmax(-1)
        return {
            "logit_diff": float(logits[-1, answer_id] - logits[-1, distractor_id]),
            "prob": float(log[answer_id].exp()),
            "kl": float((clean_log.exp() * (clean_log - log)).sum()),
        }

    clean, corrupted = read(clean_logits[None]), read(hf_logits(hf_model, corrupted_ids))
    patched = {name: torch.zeros(config.num_hidden_layers, config.num_attention_heads) for name in clean}
    for layer in range(config.num_hidden_layers):
        for head in range(config.num_attention_heads):

            def patch(x, layer=layer, head=head):
                x = x.clone()
                x[..., head_slice(hf_model, head)] = captured[layer][..., head_slice(hf_model, head)]
                return x

            for name, value in read(hf_logits(hf_model, corrupted_ids, {layer: patch})).items():
                patched[name][layer, head] = value
    return {name: (clean[name], corrupted[name], patched[name]) for name in clean}


@pytest.mark.parametrize("pair", sorted(CORRUPTED))
def test_patched_logit_diffs_match_transformers_for_every_head(hf_pair, pair):
    hf_model, ex = hf_pair
    result = ex.patch_heads(CLEAN, CORRUPTED[pair], answer=ANSWER, distractor=DISTRACTOR)
    clean_ids, corrupted_ids = ex.run(CLEAN).ids, ex.run(CORRUPTED[pair]).ids
    assert result.first_difference == FIRST_DIFFERENCE[pair]
    reference = hf_patching_reference(
        hf_model, clean_ids, corrupted_ids, result.answer_id, result.distractor_id
    )
    for name, (clean, corrupted, patched) in reference.items():  # every metric a sweep reads
        reading = result.readings[name]
        assert reading.clean == pytest.approx(clean, abs=1e-4), name
        assert reading.corrupted == pytest.approx(corrupted, abs=1e-4), name
        assert (reading.patched - patched).abs().max().item() <= 1e-4, name
        torch.testing.assert_close(
            reading.recovered, (reading.patched - corrupted) / (clean - corrupted), atol=2e-3, rtol=2e-3
        )
    clean, corrupted, patched = reference["logit_diff"]
    assert result.clean_logit_diff == pytest.approx(clean, abs=1e-4)
    assert result.corrupted_logit_diff == pytest.approx(corrupted, abs=1e-4)
    assert result.logit_diff.shape == result.recovered.shape == (ex.config.n_layers, ex.config.n_heads)
    assert result.logit_diff.dtype == torch.float32
    assert (result.logit_diff - patched).abs().max().item() <= 1e-4
    expected = (result.logit_diff - result.corrupted_logit_diff) / (
        result.clean_logit_diff - result.corrupted_logit_diff
    )
    torch.testing.assert_close(result.recovered, expected)
    assert (patched - corrupted).abs().max().item() > 1e-2  # some patch moves the logit difference


def test_a_soft_capped_models_sweep_reads_its_capped_logits(tmp_path, tiny_tokenizer):
    """The sweep reads logits through the model's LM head, soft cap included (Gemma 3 with
    final_logit_softcapping): every patched difference is transformers', hooked the same way."""
    model_type, overrides = HF_CONFIGS["gemma3-sliding"]
    hf_model = make_hf_checkpoint(
        tmp_path, tiny_tokenizer, model_type, **overrides, final_logit_softcapping=2.0
    )
    ex = explorer.load(tmp_path, device="cpu")
    assert ex.config.final_logit_softcapping == 2.0
    result = ex.patch_heads(CLEAN, CORRUPTED["differ-mid-prompt"], answer=ANSWER, distractor=DISTRACTOR)
    clean_ids, corrupted_ids = ex.run(CLEAN).ids, ex.run(CORRUPTED["differ-mid-prompt"]).ids
    reference = hf_patching_reference(
        hf_model, clean_ids, corrupted_ids, result.answer_id, result.distractor_id
    )
    for name, (clean, corrupted, patched) in reference.items():  # every metric, from capped logits
        reading = result.readings[name]
        assert reading.clean == pytest.approx(clean, abs=1e-4), name
        assert reading.corrupted == pytest.approx(corrupted, abs=1e-4), name
        assert (reading.patched - patched).abs().max().item() <= 1e-4, name
    clean, corrupted, patched = reference["logit_diff"]
    assert result.clean_logit_diff == pytest.approx(clean, abs=1e-4)
    assert result.corrupted_logit_diff == pytest.approx(corrupted, abs=1e-4)
    assert (result.logit_diff - patched).abs().max().item() <= 1e-4
    assert abs(clean) < 2 * 2.0 and (patched - corrupted).abs().max().item() > 1e-3


def test_a_sweep_split_into_passes_gives_the_same_result_and_reports_progress(hf_pair, monkeypatch):
    _, ex = hf_pair
    fractions = []
    whole = ex.patch_heads(CLEAN, CORRUPTED["differ-mid-prompt"], ANSWER, DISTRACTOR, fractions.append)
    assert fractions == pytest.approx([1 / 3, 2 / 3, 1])  # one pass over 3 layers
    monkeypatch.setattr(interventions, "SWEEP_BUDGET_BYTES", 1)  # one layer's patches per pass
    fractions.clear()
    split = ex.patch_heads(CLEAN, CORRUPTED["differ-mid-prompt"], ANSWER, DISTRACTOR, fractions.append)
    torch.testing.assert_close(split.logit_diff, whole.logit_diff, rtol=0, atol=1e-5)
    assert fractions == pytest.approx([step / 6 for step in range(1, 7)])  # passes of 3, 2 and 1 layers


def test_top_heads_are_sorted_by_the_size_of_the_recovered_fraction_with_its_sign(hf_pair):
    _, ex = hf_pair
    result = ex.patch_heads(CLEAN, CORRUPTED["differ-mid-prompt"], ANSWER, DISTRACTOR)
    every = result.top_heads(result.recovered.numel())
    sizes = [abs(value) for *_, value in every]
    assert sizes == sorted(sizes, reverse=True)
    n_layers, n_heads = result.recovered.shape
    assert {(layer, head) for layer, head, _ in every} == {
        (i // n_heads, i % n_heads) for i in range(n_layers * n_heads)
    }
    assert all(result.recovered[layer, head] == value for layer, head, value in every)  # with its sign
    layer, head, value = result.top_heads(1)[0]
    assert abs(value) == pytest.approx(result.recovered.abs().max().item())
    for metric in ("prob", "kl"):  # by another metric, its own order
        recovered = result.readings[metric].recovered
        layer, head, value = result.top_heads(1, metric)[0]
        assert abs(value) == pytest.approx(recovered.abs().max().item()) and recovered[layer, head] == value


@pytest.fixture(scope="module")
def tiny(gqa_checkpoint):
    return explorer.load(gqa_checkpoint, device="cpu")


@pytest.mark.parametrize(
    ("ablate", "mode", "message"),
    [
        ([(4, 0)], "zero", "layer 4 of ablated head (4, 0) is out of range: this model has layers 0 to 3"),
        ([(0, 8)], "zero", "head 8 of ablated head (0, 8) is out of range: this model has heads 0 to 7"),
        ([(-1, 0)], "zero", "layer -1 of ablated head (-1, 0) is out of range"),
        ([(0.5, 0)], "zero", "layer 0.5 of ablated head (0.5, 0) is out of range"),
        ([3], "zero", "each ablated head is a (layer, head) pair, got 3"),
        ([(0, 1)], "resample", "ablate_mode must be one of 'zero', 'mean', got 'resample'"),
        ([], "resample", "ablate_mode must be one of 'zero', 'mean', got 'resample'"),
    ],
)
def test_bad_ablations_say_what_is_wrong(tiny, ablate, mode, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tiny.run(PROMPT, ablate=ablate, ablate_mode=mode)


def test_ablated_heads_may_come_as_lists_and_repeat(tiny):
    run = tiny.run(PROMPT, ablate=[[2, 1], (0, 3), (2, 1)])
    assert run.ablated == ((0, 3), (2, 1))


def test_a_multi_token_answer_is_refused_naming_its_tokens(tiny):
    with pytest.raises(PromptError, match=r"The answer “ question” is 6 tokens \(“ ” \| “qu” \| “es”"):
        tiny.patch_heads(CLEAN, CORRUPTED["differ-mid-prompt"], " question", DISTRACTOR)
    with pytest.raises(PromptError, match="The distractor “ not” is 2 tokens"):
        tiny.patch_heads(CLEAN, CORRUPTED["differ-mid-prompt"], ANSWER, " not")
    with pytest.raises(PromptError, match="The answer is empty"):
        tiny.patch_heads(CLEAN, CORRUPTED["differ-mid-prompt"], "", DISTRACTOR)


def test_prompts_of_different_lengths_are_refused_showing_both_tokenizations(tiny):
    with pytest.raises(PromptError) as error:
        tiny.patch_heads("To be, or not to be", "To be, or not to be, again", ANSWER, DISTRACTOR)
    message = str(error.value)
    assert "same number of tokens" in message
    assert "Clean, 8 tokens: “To” | “ be” | “,” | “ or” | “ no” | “t” | “ to” | “ be”." in message
    assert "Corrupted, 11 tokens: “To” | “ be”" in message and "“ again”" not in message


@pytest.mark.parametrize("role", ["answer", "distractor"])
def test_a_ten_megabyte_answer_is_refused_unread_in_a_message_of_a_few_words(tiny, monkeypatch, role):
    """An answer longer than any token never reaches the tokenizer (a 3 MB one took 50 s and 2 GB)."""
    read = []
    encode = type(tiny.tokenizer).encode
    monkeypatch.setattr(
        type(tiny.tokenizer),
        "encode",
        lambda self, text, *a, **k: read.append(len(text)) or encode(self, text, *a, **k),
        raising=False,
    )
    words = {"answer": "x" * 10_000_000, "distractor": DISTRACTOR} | (
        {"distractor": "y" * 10_000_000} if role == "distractor" else {}
    )
    with pytest.raises(PromptError) as error:
        tiny.patch_heads(
            CLEAN,
            CORRUPTED["differ-mid-prompt"],
            words["answer"] if role == "answer" else ANSWER,
            words["distractor"],
        )
    assert f"The {role} is 10,000,000 characters long; one token is at most 1,024" in str(error.value)
    assert len(str(error.value)) < 1000 and max(read, default=0) < 10_000


def test_a_lone_surrogate_in_the_answer_is_named_not_a_type_error(tiny):
    with pytest.raises(PromptError, match=r"The answer holds a lone surrogate \(U\+D800, character 3\)"):
        tiny.patch_heads(CLEAN, CORRUPTED["differ-mid-prompt"], " Ma\ud800", DISTRACTOR)


def test_a_long_answer_and_long_prompts_are_quoted_briefly(tiny):
    with pytest.raises(PromptError) as error:
        tiny.patch_heads(CLEAN, CORRUPTED["differ-mid-prompt"], " question" * 100, DISTRACTOR)
    assert len(str(error.value)) < 600 and "… " in str(error.value)
    with pytest.raises(PromptError) as error:
        tiny.patch_heads("To be " * 60, "To be " * 59 + "or", ANSWER, DISTRACTOR)
    assert "same number of tokens" in str(error.value) and len(str(error.value)) < 1000


def test_prompts_past_the_sweeps_limit_are_refused_not_cut(tiny):
    """Cutting would read the answer at another position: a prompt past the limit is refused."""
    with pytest.raises(PromptError, match="clean prompt is longer than the 4 tokens a patching sweep"):
        tiny.patch_heads(CLEAN, CORRUPTED["differ-mid-prompt"], ANSWER, DISTRACTOR, max_tokens=4)
    n = len(tiny.run(CLEAN).ids)
    result = tiny.patch_heads(CLEAN, CORRUPTED["differ-mid-prompt"], ANSWER, DISTRACTOR, max_tokens=n)
    assert result.recovered.shape == (tiny.config.n_layers, tiny.config.n_heads)


def test_identical_prompts_and_identical_answer_and_distractor_are_refused(tiny):
    with pytest.raises(PromptError, match="same tokens: there is nothing to patch"):
        tiny.patch_heads(CLEAN, CLEAN, ANSWER, DISTRACTOR)
    with pytest.raises(PromptError, match="answer and the distractor are the same token"):
        tiny.patch_heads(CLEAN, CORRUPTED["differ-mid-prompt"], ANSWER, ANSWER)
    with pytest.raises(PromptError, match="prompt is empty"):
        tiny.patch_heads("", CLEAN, ANSWER, DISTRACTOR)


@pytest.fixture(scope="module")
def bundled():
    return explorer.load(device="cpu")


def copy_probability(ex, ablate=(), mode="zero") -> tuple[float, str]:
    """p(" silver") where the line's second copy should repeat it, and the top next token."""
    run = ex.run(examples.COPY, ablate=ablate, ablate_mode=mode)
    silver = ex.tokenizer.encode(" silver", add_special_tokens=False).ids[0]
    return float(run.next_token_probs()[silver]), run.top_next_tokens(1)[0][0]


def second_copy_loss(ex, ablate=()) -> float:
    """Mean next-token loss (nats) over the second copy of the induction line written twice."""
    line = examples.COPY.split("\n")[0]
    run = ex.run(f"{line}\n{line}", ablate=ablate)
    ids, half = torch.tensor(run.ids), run.n_tokens // 2  # each copy is the same 25 tokens (+ newline)
    positions = torch.arange(half + 1, run.n_tokens - 1)  # predicting the second copy's tokens 2..25
    return -run.logits.log_softmax(-1)[positions, ids[positions + 1]].mean().item()


def test_ablating_the_bundled_models_induction_heads_stops_the_copy(bundled):
    """Measured: p(" silver") 0.306 (top 1); 3.1 alone 0.153; 3.0–3.2 0.001 (top 1 becomes " death");
    the other kv group's 3.3–3.5 0.320. Loss on the second copy: 1.32 nats; 5.39 with 3.0–3.2 ablated,
    as hard as the first copy (5.92)."""
    plain, top = copy_probability(bundled)
    assert top == " silver" and plain > 0.25
    alone, _ = copy_probability(bundled, [(3, 1)])
    assert alone < 0.6 * plain
    ablated, top = copy_probability(bundled, examples.INDUCTION_HEADS)
    assert ablated < 0.01 and top != " silver"
    mean_ablated, _ = copy_probability(bundled, examples.INDUCTION_HEADS, mode="mean")
    assert mean_ablated < 0.01
    control, top = copy_probability(bundled, [(3, 3), (3, 4), (3, 5)])  # heads that read kv head 1
    assert top == " silver" and abs(control - plain) < 0.05
    assert second_copy_loss(bundled, examples.INDUCTION_HEADS) > second_copy_loss(bundled) + 3


def test_patching_the_copy_example_puts_the_induction_heads_on_top(bundled):
    """Measured: clean 6.43, corrupted −6.47; recovered 3.2: 0.45, 3.0: 0.35, 0.6: 0.32, 3.1: 0.26."""
    example = examples.PATCHING_EXAMPLES["induction (bundled model)"]
    result = bundled.patch_heads(example.clean, example.corrupted, example.answer, example.distractor)
    assert result.clean_logit_diff > 3 and result.corrupted_logit_diff < -3
    top_four = {(layer, head) for layer, head, _ in result.top_heads(4)}
    assert {(3, 0), (3, 2)} <= top_four
    assert result.recovered[3, :3].sum() > 0.8  # the three induction heads together
    assert result.recovered[3, 3:].abs().max() < 0.1  # the other kv group's heads do not copy here
