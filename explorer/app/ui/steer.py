"""The Generate tab's "Steer": a direction in the stream from two lists of texts (`ex.steering_vector`:
the mean stream entering a layer over the first list less over the second), added at that layer with a
strength; the steered continuation of the prompt above beside the plain one and beside the same prompt
behind a typed instruction, the prompting baseline that AxBench (2025) found beats most steering. Each
with the probability the model gives the concept's words at each new position and the perplexity of a
held-out text under the same condition (`explorer.engine.steering`). The API endpoint `/steer`.

The page's link carries the settings of the steering on screen (`settings`, `linked`), and a link's
settings come back into the panel, opened, as the page loads (`restored`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

import gradio as gr

from explorer.app import limits, markup
from explorer.app.ui import inputs as checked
from explorer.app.ui.common import COSTLY, Shared, gpu, guarded, index
from explorer.app.ui.wiring import named
from explorer.engine import steering

NEW_TOKENS = 24  # each continuation's
POSITIVE = "The bride walked down the aisle at the wedding.\nThey exchanged vows at a small wedding ceremony."
NEGATIVE = (
    "The runner walked down the track at the stadium.\nThey exchanged notes at a small business meeting."
)
WORDS = "wedding, bride, groom, marriage, ceremony"
INSTRUCTION = "Write about a wedding."
HELD_OUT = (
    "The river rises in the hills to the north and runs south through farmland before it reaches the sea."
)
INTRO = (
    "### Steer\nA direction in the stream: the mean of the stream entering the layer over the first texts "
    "less over the second, added at every position with the strength below. The steered continuation of "
    "the prompt above sits beside the plain one and beside the prompt behind your instruction (prompting "
    "often beats steering); each with the probability of the concept's words at each new token and the "
    "perplexity of a held-out text under the same condition (what the edit costs the model's language)."
)


STRENGTHS = (-16.0, 16.0, 0.5)  # the slider's least, most and step
# a link's name for each setting, by the panel's field that holds it
LINK_KEYS = dict(
    positive="towards",
    negative="away",
    layer="steer_layer",
    strength="strength",
    words="words",
    instruction="instruction",
    held_out="held_out",
)


@dataclass(frozen=True, kw_only=True)
class SteerPanel:
    accordion: gr.Accordion
    positive: gr.Textbox  # the texts the direction points to, a line each
    negative: gr.Textbox  # and away from
    layer: gr.Number
    strength: gr.Slider
    words: gr.Textbox  # the concept's words, comma-separated
    instruction: gr.Textbox  # the prompting baseline's
    held_out: gr.Textbox
    button: gr.Button
    table: gr.HTML
    linked: gr.State  # the link's part naming the steering on screen ('' before one)

    @property
    def settings_inputs(self) -> list:
        """The inputs a link restores, in `LINK_KEYS`' order."""
        return [getattr(self, name) for name in LINK_KEYS]

    def restored(self, linked: str) -> dict:
        """The inputs a link's steering settings (`settings`) name, by input, the panel opened; a
        setting the link leaves out, or names wrongly, kept as it is."""
        params = dict(parse_qsl(linked))
        updates = {
            getattr(self, name): params[key][:MAX_SETTING_CHARS]
            for name, key in LINK_KEYS.items()
            if name not in ("layer", "strength") and key in params
        }
        if (layer := params.get(LINK_KEYS["layer"], "")).isdecimal() and len(layer) <= 6:
            updates[self.layer] = int(layer)
        strength = number(params.get(LINK_KEYS["strength"], ""))
        low, high, step = STRENGTHS
        if strength is not None and low <= strength <= high and (strength / step).is_integer():
            updates[self.strength] = strength
        return updates | {self.accordion: gr.Accordion(open=True)} if updates else {}


MAX_SETTING_CHARS = 4000  # a setting read from a link, at most


def number(text: str) -> float | None:
    """A finite number from a link's text, or None."""
    try:
        value = float(text[:32])
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def settings(positive, negative, layer, strength, words, instruction, held_out) -> str:
    """The link's part naming the steering on screen (`SteerPanel.restored` reads it back)."""
    values = dict(
        positive=positive,
        negative=negative,
        layer=int(layer),
        strength=f"{float(strength):g}",
        words=words,
        instruction=instruction,
        held_out=held_out,
    )
    return urlencode({LINK_KEYS[name]: value for name, value in values.items()})


def lines(text: str, what: str) -> list[str]:
    found = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not found:
        raise ValueError(f"Give the {what} texts, a line each: the direction is their mean less the others'.")
    return found


def build(shared: Shared, prompt: gr.Textbox, model: gr.State) -> SteerPanel:
    """The panel, in an accordion of the tab it is built in, wired."""
    with gr.Accordion("Steer", open=False, elem_id="steer") as accordion:
        gr.Markdown(INTRO)
        with gr.Row():
            positive = gr.Textbox(
                POSITIVE, label="Towards (a text a line)", lines=3, elem_id="steer-positive"
            )
            negative = gr.Textbox(
                NEGATIVE, label="Away from (a text a line)", lines=3, elem_id="steer-negative"
            )
        with gr.Row():
            layer = checked.Number(2, label="Layer", precision=0, minimum=0, elem_id="steer-layer")
            low, high, step = STRENGTHS
            strength = checked.Slider(
                low, high, value=4, step=step, label="Strength", elem_id="steer-strength"
            )
            words = gr.Textbox(WORDS, label="The concept's words", elem_id="steer-words")
        with gr.Row():
            instruction = gr.Textbox(
                INSTRUCTION, label="Instruction (the prompting baseline)", elem_id="steer-instruction"
            )
            held_out = gr.Textbox(HELD_OUT, label="Held-out text (its perplexity)", elem_id="steer-held-out")
        button = gr.Button("Steer", variant="primary", elem_id="steer-button")
        table = gr.HTML(elem_id="steer-result")
    panel = SteerPanel(
        accordion=accordion,
        positive=positive,
        negative=negative,
        layer=layer,
        strength=strength,
        words=words,
        instruction=instruction,
        held_out=held_out,
        button=button,
        table=table,
        linked=gr.State(""),
    )

    def steer(
        request: gr.Request, text, source, positive, negative, layer, strength, words, instruction, held
    ):
        if not (text or "").strip():
            raise ValueError("Type a prompt above: steering continues it.")
        explorer = shared.workspace.explorer(source, load=False)
        last = explorer.config.n_layers
        layer = index(layer, "layer")
        if not 0 <= layer <= last:
            raise ValueError(f"The layer is one of this model's 0 to {last} (the final norm's input).")
        concept = [word.strip() for word in (words or "").split(",") if word.strip()]
        if not (held or "").strip() or not (instruction or "").strip():
            raise ValueError("Give an instruction and a held-out text: they are the baseline and the cost.")
        toward, away = lines(positive, "towards"), lines(negative, "away-from")
        cost = limits.steering_cost(explorer.config, NEW_TOKENS)
        with shared.readings.reading(request, cost):
            vector = explorer.steering_vector(toward, away, layer)
            readings = steering.compare(
                explorer,
                text,
                concept,
                held,
                vector,
                layer,
                (0.0, float(strength)),
                instruction,
                NEW_TOKENS,
                shared.workspace.policy.max_tokens,
            )
        said = f"Steered at layer {layer} with strength {float(strength):g}: {NEW_TOKENS} new tokens each."
        linked = settings(positive, negative, layer, strength, words, instruction, held)
        return {
            shared.status: markup.status(said, "info"),
            table: markup.steering_table(readings),
            panel.linked: linked,
        }

    inputs = {"text": prompt, "source": model, "positive": positive, "negative": negative, "layer": layer}
    inputs |= {"strength": strength, "words": words, "instruction": instruction, "held": held_out}
    outputs = [shared.status, table, panel.linked]
    button.click(*named(gpu(guarded(shared.status)(steer)), inputs), outputs, api_name="steer", **COSTLY)
    return panel
