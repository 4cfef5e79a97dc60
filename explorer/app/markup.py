"""The app's HTML fragments: the token strip, status messages and the model card.

`gr.HTML` renders what it is given and sanitises nothing, so every string that came from a person or
a checkpoint is escaped here, on its way in.
"""

from __future__ import annotations

from html import escape

from explorer.engine.config import ModelConfig
from explorer.engine.tokens import CHARS_PER_TOKEN, char_budget, printable
from explorer.views.labels import global_layers

# Every token is TOKEN_PX tall, so the strip shows STRIP_ROWS whole rows and scrolls the rest, a row at
# a time: its height is a whole number of rows, never one cut in half.
TOKEN_PX, GAP_PX, STRIP_ROWS = 30, 3, 6
STRIP_STYLE = (
    f"display:flex;flex-wrap:wrap;gap:{GAP_PX}px;max-height:{STRIP_ROWS * (TOKEN_PX + GAP_PX) - GAP_PX}px;"
    "overflow-y:auto;font-size:13px;scroll-snap-type:y proximity;"
)
TOKEN_STYLE = (
    f"display:inline-flex;flex-direction:column;align-items:center;box-sizing:border-box;height:{TOKEN_PX}px;"
    "padding:1px 5px;border-radius:4px;background:#eef2ff;border:1px solid #c7d2fe;white-space:pre;"
    "font-family:ui-monospace,monospace;line-height:16px;overflow:hidden;scroll-snap-align:start;"
)
NOTE_STYLE = "font-size:12px;color:#78350f;margin-top:4px"
POSITION_STYLE = "font-size:9px;color:#6b7280;line-height:10px;"
# Once per strip, not once per token: at 2,048 tokens the styles written on each were 480 KB of the
# strip's 636 KB.
STRIP_CSS = (
    f"<style>#token-strip-content .token{{{TOKEN_STYLE}}}"
    f"#token-strip-content .position{{{POSITION_STYLE}}}#token-strip-content .token{{cursor:pointer}}</style>"
)
STATUS_STYLES = {
    "info": "background:#f0f9ff;border:1px solid #bae6fd;color:#0c4a6e;",
    "warning": "background:#fffbeb;border:1px solid #fcd34d;color:#78350f;",
}


GLOSSARY = {  # the jargon a newcomer meets, each explained in one line where it first appears
    "SDPA": "PyTorch's scaled_dot_product_attention: one fused, fast kernel that never shows the "
    "attention weights it computes",
    "eager": "attention computed step by step (Q·Kᵀ, scaling, mask, softmax) so that every "
    "intermediate tensor can be shown; checked against SDPA in the Faithfulness tab",
    "kv": "the key/value head a query head reads: with grouped-query attention several query heads share one",
    "hatched": "cells of keys after their query: the causal mask hides them, so a token never "
    "attends to the future",
}


def explained(term: str, shown: str | None = None) -> str:
    """A term with its one-line explanation on hover (an <abbr>, dotted underline)."""
    return f'<abbr title="{escape(GLOSSARY[term])}">{escape(shown or term)}</abbr>'


def token_strip(tokens: list[str], note: str = "") -> str:
    """Every token with its position above it, and a note under them (why the prompt was truncated:
    `truncation`, the same words as the status line's)."""
    cells = "".join(
        f'<span class="token" title="position {i}: {escape(printable(_hover(token)))}">'
        f'<span class="position">{i}</span>{escape(printable(token))}</span>'
        for i, token in enumerate(tokens)
    )
    if note:
        note = f'<div class="strip-note" style="{NOTE_STYLE}">{escape(note)}</div>'
    count = (
        f'<div style="font-size:12px;color:#6b7280;margin-bottom:4px">{len(tokens)} tokens '
        "· click one to see which heads look at it</div>"
    )
    strip = f'<div style="{STRIP_STYLE}">{cells}</div>'
    return f'<div id="token-strip-content">{STRIP_CSS}{count}{strip}{note}</div>'


def truncation(n_tokens: int, n_dropped: int, n_chars_dropped: int, context: int, max_tokens: int) -> str:
    """Why a prompt was cut, in one message for the status line and the token strip: to which limit
    (the model's context, or the app's tokens per run when that is lower, with the context named too),
    how many tokens were read and left out, and the characters never read. '' when nothing was cut."""
    if not (n_dropped or n_chars_dropped):
        return ""
    limit = min(context, max_tokens)
    what = (
        f"the model's context of {context:,} tokens"
        if limit == context
        else f"this app's limit of {limit:,} tokens per run (the model's context is {context:,})"
    )
    message = f"The prompt is longer than {what}: the views show its first {n_tokens:,} tokens."
    if n_dropped:
        message += f" {n_dropped:,} more tokens were left out"
        message += "," if n_chars_dropped else "."
    if n_chars_dropped:
        lead = " and" if n_dropped else ""
        message += (
            f"{lead} its last {n_chars_dropped:,} characters were not read (a prompt is cut at "
            f"{char_budget(limit):,} characters, {CHARS_PER_TOKEN} per token, before it is tokenized)."
        )
    return message


def _hover(token: str) -> str:
    """What a token holds, spelled out for a token that holds part of a character (`engine.tokens`)."""
    return getattr(token, "hover", token)


def toast(message: str) -> str:
    """A message as a toast's text (Gradio draws it as HTML): shown as written, markup and all. Quotes
    are left as they are (the text is no attribute), so an API caller reads the message as written."""
    return escape(message, quote=False)


def status(message: str, kind: str = "info") -> str:
    """A one-line message box; '' hides it."""
    if not message:
        return ""
    return (
        f'<div class="status-{kind}" style="{STATUS_STYLES[kind]}padding:6px 10px;border-radius:6px;'
        f'font-size:13px">{escape(message)}</div>'
    )


def model_card(name: str, config: ModelConfig, note: str = "") -> str:
    """What is loaded: its name, the shape of its attention, and `note` under them (how long it took to
    load)."""
    kind = (
        "MHA"
        if config.n_kv_heads == config.n_heads
        else "MQA"
        if config.n_kv_heads == 1
        else f"GQA, {config.group_size} query heads per kv head"
    )
    facts = (
        f"{config.n_layers} layers · {config.n_heads} query heads · {config.n_kv_heads} kv heads ({kind}) · "
        f"head dim {config.head_dim} · context {config.context_length} tokens"
    )
    if any(config.window(layer) is not None for layer in range(config.n_layers)):
        full = global_layers(config)  # the layers that see every key, beside the sliding ones
        facts += f" · sliding window of {config.sliding_window:,} keys"
        facts += f", global layers {', '.join(map(str, full))}" if full else ""
    note = f'<br><span class="card-note">{escape(note)}</span>' if note else ""
    return f'<div style="font-size:13px"><b>{escape(name)}</b><br>{escape(facts)}{note}</div>'


def top_heads(lists: dict[str, list], titles: dict[str, str]) -> str:
    """The Overview's lists of top heads, one column per score, each head a button the page turns into a
    pick of that layer and head (explorer/app/ui/assets/page.js).  # lists {name: [views.TopHead]}"""
    columns = []
    for name, heads in lists.items():
        rows = "".join(
            f'<button class="top-head" data-layer="{h.layer}" data-head="{h.head}" '
            f'title="open layer {h.layer}, head {h.head} (kv {h.kv_head})">'
            f"<b>{h.layer}.{h.head}</b> {h.score:.2f}</button>"
            for h in heads
        )
        rows = rows or '<span class="top-none">none on this prompt</span>'
        title = f'<div class="top-title">{escape(titles[name])}</div>'
        columns.append(f'<div class="top-column">{title}{rows}</div>')
    return f'<div id="top-heads-content">{"".join(columns)}</div>'


def ranked_heads(rows: list, metric: str, changes: list = ()) -> str:
    """A patching sweep's heads that move `metric` most either way, ranked by |recovered| with its sign
    (a negative one pushes away from the clean run's), each with its direct effect; a row is a button the
    page turns into opening that head (explorer/app/ui/assets/page.js). Under them, the tokens the
    corrupted prompt changes: which question the ranking answers.
    # rows [views.RankedHead], changes [views.interventions.TokenChange]"""
    body = "".join(
        f'<tr class="ranked-head{" negative" * (h.recovered < 0)}" data-layer="{h.layer}" '
        f'data-head="{h.head}" title="open layer {h.layer}, head {h.head} (kv {h.kv_head}) on the clean '
        f'prompt"><td>{rank}</td><td><b>{h.layer}.{h.head}</b> · kv {h.kv_head}</td>'
        f"<td>{h.recovered:+.3g}</td><td>{h.direct:+.3g}</td></tr>"
        for rank, h in enumerate(rows, start=1)
    )
    head = "<tr><th>#</th><th>head</th><th>recovered</th><th>direct effect</th></tr>"
    title = f"The heads with the largest effect on {escape(metric)}, either way"
    title = f'<div class="ranked-title">{title}</div>'
    note = (
        '<div class="ranked-note">Ranked by |recovered|: + brings back the clean run’s metric, − pushes '
        "it further away. Direct effect: on the logit difference, in the clean run. Click a row to open that "
        "head.</div>"
    )
    table = f"<table><thead>{head}</thead><tbody>{body}</tbody></table>"
    return f'<div id="ranked-heads-content">{title}{table}{note}{corruption(changes)}</div>'


def graph_heads(rows: list[tuple[int, int, float]]) -> str:
    """The graph per position's heads ranked by their edges' summed score, either way (a negative one
    pushes the metric down); a row is a button the page turns into opening that head
    (explorer/app/ui/assets/page.js).  # rows [(layer, head, score)]"""
    body = "".join(
        f'<tr class="graph-head{" negative" * (score < 0)}" data-layer="{layer}" data-head="{head}" '
        f'title="open layer {layer}, head {head} on the first pair’s clean prompt"><td>{rank}</td>'
        f"<td><b>{layer}.{head}</b></td><td>{score:+.3g}</td></tr>"
        for rank, (layer, head, score) in enumerate(rows, start=1)
    )
    head = "<tr><th>#</th><th>head</th><th>Σ score of its edges</th></tr>"
    title = '<div class="ranked-title">The graph’s heads by the summed score of their edges, either way</div>'
    table = f"<table><thead>{head}</thead><tbody>{body}</tbody></table>"
    return f'<div id="graph-heads-content">{title}{table}</div>'


CHANGES_LISTED = 6  # a corruption's changed tokens the ranked table names, then how many more


def corruption(changes: list) -> str:
    """What the corrupted prompt changes, token by token ("9 “ John” → “ Mary”"), or ''.
    # changes [views.interventions.TokenChange]"""
    if not changes:
        return ""
    listed = "; ".join(
        f"{c.position} “{escape(printable(c.clean))}” → “{escape(printable(c.corrupted))}”"
        for c in changes[:CHANGES_LISTED]
    )
    more = f"; {len(changes) - CHANGES_LISTED:,} more" if len(changes) > CHANGES_LISTED else ""
    count = f"{len(changes)} token{'s' * (len(changes) != 1)}"
    said = f"The corrupted prompt changes {count} (position, clean → corrupted): {listed}{more}."
    return f'<div class="ranked-corruption">{said}</div>'


def pairs_table(rows: list, title: str) -> str:
    """A dataset of prompt pairs, a row each (numbered from 1, as the messages about a pair number
    them): the clean prompt, the corrupted one with the words it changes marked, and the answer and
    distractor in quotes, so a leading space shows.  # rows [views.circuits.PairRow]"""

    def text(value: str) -> str:
        return escape(printable(value))

    body = "".join(
        f"<tr><td>{i}</td><td>{text(row.clean)}</td><td>"
        + "".join(f"<mark>{text(p)}</mark>" if changed else text(p) for p, changed in row.corrupted)
        + f"</td><td>“{text(row.answer)}”</td><td>“{text(row.distractor)}”</td></tr>"
        for i, row in enumerate(rows, start=1)
    )
    head = "<tr><th>#</th><th>clean</th><th>corrupted</th><th>answer</th><th>distractor</th></tr>"
    table = f'<div class="pairs-scroll"><table><thead>{head}</thead><tbody>{body}</tbody></table></div>'
    note = '<div class="pairs-note">Marked: the words the corrupted prompt changes.</div>'
    title = f'<div class="pairs-title">{escape(title)}</div>'
    return f'<div id="circuit-pairs-content">{title}{table}{note}</div>'


def steering_table(readings: list) -> str:
    """Steering beside the plain and the prompted continuations, a row each: the continuation, the
    probability of the concept's words at each new position (mean) and the held-out text's perplexity.
    # readings [engine.steering.Reading]"""
    body = "".join(
        f'<tr class="steer-row"><td><b>{escape(r.label)}</b></td><td>{escape(printable(r.continuation))}</td>'
        f"<td>{r.concept_probability:.4f}</td><td>{r.held_out_perplexity:,.1f}</td></tr>"
        for r in readings
    )
    names = ("condition", "continuation", "p(concept word next)", "held-out perplexity")
    head = "<tr>" + "".join(f"<th>{name}</th>" for name in names) + "</tr>"
    return f'<div id="steer-table"><table><thead>{head}</thead><tbody>{body}</tbody></table></div>'
