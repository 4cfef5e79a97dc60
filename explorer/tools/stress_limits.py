"""The stress run's round three (issue 38): what one visitor's requests may cost the others.

    queue     one address holds the queue: an expensive flow graph, then 64 raw joins from new sessions
              of that address, each a run at the token limit, their streams never read; a visitor from
              another address runs a short prompt
    disk      three layer downloads (.npz) from one visitor: how many files stay on the server's disk
    expensive nine expensive readings at once from nine sessions of eight addresses at the app's token
              limit (flow graphs, the lens, attribution, the Overview, a patching sweep): the server's
              memory and `GET /`
    configs   hostile Gemma 3 configs (10¹² layers, a window pattern of 0, an infinite window, RoPE
              parameters of the wrong kind, nested layer kinds, near-zero scalars); the server itself
              starts beside a HF cache holding JSON nested 400,000 deep and a snapshot link loop

The readings run on SmolLM2 (when installed; else the stress run's `long` model) at the run's token
limit. Their endpoints read the prompt a session ran before, so each visitor runs it first.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from explorer.app.fair_queue import PER_KIND
from explorer.loading import catalog

LINE = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. "
CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"
GEMMA3 = {
    "model_type": "gemma3_text",
    "vocab_size": 4096,
    "hidden_size": 64,
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "intermediate_size": 96,
    "head_dim": 16,
    "sliding_window": 8,
}
# What a reading's status says when it was drawn (a patching sweep reports its top heads; a flow graph
# drawn at a higher threshold says so), or stopped or refused by a limit it names
SAID = ("Patched each of", "drawn at threshold")
SAID += ("EXPLORER_REQUEST_SECONDS", "EXPLORER_MEMORY_GB", "one expensive reading per visitor")
HOSTILE_GEMMA3 = {  # name: (change, what the refusal says)
    "10¹² layers": ({"num_hidden_layers": 10**12}, "n_layers is 1,000,000,000,000"),
    "window pattern 0": ({"sliding_window_pattern": 0}, "sliding_window_pattern must be a whole number"),
    "infinite window": ({"sliding_window": float("inf")}, "sliding_window must be a whole number"),
    "rope_parameters a list": ({"rope_parameters": [1, 2]}, "rope_parameters must be a JSON object"),
    "rope entry a string": (
        {"rope_parameters": {"full_attention": "fast"}},
        "rope_parameters['full_attention'] must be a JSON object",
    ),
    "nested layer kinds": ({"layer_types": [["sliding_attention"]] * 6}, "layer_types must name 6 layers"),
    "tiny query scalar": ({"query_pre_attn_scalar": 1e-300}, "query_pre_attn_scalar must be a finite number"),
    "tiny logit cap": (
        {"final_logit_softcapping": 1e-300},
        "final_logit_softcapping must be a finite number",
    ),
}


def write_round_three_files(folder: Path) -> dict[str, Path]:
    """The hostile Gemma 3 configs (a config alone: each is refused before any weight is looked for),
    and an HF cache holding JSON nested 400,000 deep and a link loop, for the server to start beside."""
    paths = {}
    for name, (change, _) in HOSTILE_GEMMA3.items():
        target = folder / f"gemma3-{len(paths)}"
        target.mkdir()
        (target / "config.json").write_text(json.dumps({**GEMMA3, **change}))
        paths[name] = target
    hub = folder / "hub"
    snapshots = hub / "models--org--deep" / "snapshots"
    (snapshots / "0").mkdir(parents=True)
    (snapshots / "0" / "config.json").write_text("[" * 400_000 + "]" * 400_000)
    for name in ("tokenizer.json", "model.safetensors"):
        (snapshots / "0" / name).write_text("{}")
    (snapshots / "loopy").symlink_to("loopy")
    paths["hub"] = hub
    return paths


class RoundThree:
    """The phases above, on a `Stress` run (its requests are recorded with its others)."""

    def __init__(self, stress, paths: dict[str, Path], downloads: Path, per_visitor: int, timeout: float):
        self.stress, self.paths, self.downloads, self.per_visitor = stress, paths, downloads, per_visitor
        self.timeout = timeout  # a reading waits its turn behind the others: longer than the run's timeout
        self.model = catalog.SMOLLM2_LABEL if catalog.smollm2_gguf() else str(paths["long"])
        self.long_text = LINE * (stress.max_tokens // 8)  # past the token limit: cut to it

    def visit(self, category: str, address: str | None = None) -> dict:
        """A new visitor's session (from a new address unless given) with the model loaded and the long
        prompt run."""
        stress = self.stress
        visit = dict(session=uuid.uuid4().hex, address=address or stress.address())
        stress.app(visit["address"], self.timeout)
        stress.request(category, "load", "load_model", [self.model], _says("Loaded"), **visit)
        stress.request(category, "run at the limit", "run", [self.long_text, 0, 0], _ran, **visit)
        return visit

    def queue(self) -> None:
        stress = self.stress
        visit = self.visit("queue")
        holding = threading.Thread(
            target=stress.request,
            args=("queue", "flow at the limit, threshold 0.01", "flow_at", [0.01, 1], _drawn_or_limited),
            kwargs=visit,
        )
        holding.start()
        time.sleep(1.0)  # the flow graph is computing
        client = stress.app(visit["address"]).http
        joins, start = [], time.monotonic()
        for i in range(64):
            body = {"data": [f"{i} {self.long_text}", 0, 0], "session_hash": uuid.uuid4().hex}
            joins.append(client.post(f"{stress.url.rstrip('/')}/gradio_api/call/run", json=body).status_code)
        admitted = joins.count(200)
        stress.record(
            "queue",
            f"64 joins from one address ({admitted} admitted, {joins.count(429)} refused)",
            start,
            admitted <= PER_KIND and joins.count(429) == 64 - admitted,
            f"statuses {sorted(set(joins))}",
        )
        elsewhere = dict(session=uuid.uuid4().hex, address=stress.address())
        stress.request("queue", "a short run from another address", "run", [LINE, 0, 0], _ran, **elsewhere)
        holding.join()

    def disk(self) -> None:
        stress = self.stress
        visit = dict(session=uuid.uuid4().hex, address=stress.address())
        stress.app(visit["address"], self.timeout)
        stress.request("disk", "load", "load_model", [self.model], _says("Loaded"), **visit)
        stress.request("disk", "run", "run", [LINE * 40, 0, 0], _ran, **visit)
        start = time.monotonic()
        for layer in range(3):
            stress.request("disk", f"layer {layer} tensors (.npz)", "npz", [layer], _kept, **visit)
        files = [p for p in self.downloads.rglob("*.npz")] if self.downloads.is_dir() else []
        size = sum(p.stat().st_size for p in files)
        stress.record(
            "disk",
            f"files left by three downloads: {len(files)} ({size / 2**20:,.0f} MiB)",
            start,
            len(files) <= 1,
        )

    def expensive(self) -> None:
        """Nine readings at once from eight sessions, each after its session ran the long prompt."""
        readings = [
            ("flow graph", "flow", [0.04]),
            ("flow graph at 0.01", "flow_at", [0.01, 1]),
            ("lens", "lens", [0, "", "", 1]),
            ("attribution", "attribution", ["", "", 1]),
            ("overview", "overview", []),
            ("patching sweep", "patch", [CLEAN, CORRUPTED, " Mary", " John"]),
            ("flow graph", "flow", [0.1]),
            ("lens", "lens", [0, " the", " a", 1]),
        ]
        visits = [self.visit("expensive") for _ in readings]
        # a ninth from a second session of the first visitor's address (the REST API's streams of one
        # session would read each other's answers)
        readings.append(("flow graph, the same address", "flow", [0.2]))
        visits.append(self.visit("expensive", visits[0]["address"]))

        def read(i):
            name, api, data = readings[i]
            self.stress.request("expensive", name, api, data, _drawn_or_limited, **visits[i])

        with ThreadPoolExecutor(len(readings)) as pool:
            list(pool.map(read, range(len(readings))))

    def configs(self) -> None:
        for name, (_, says) in HOSTILE_GEMMA3.items():
            self.stress.request(
                "configs", f"Gemma 3: {name}", "load_model", [str(self.paths[name])], _says(says)
            )


def _says(message: str):
    return lambda status: message in status.replace("&#x27;", "'")


def _ran(status: str) -> bool:
    return "one fast forward" in status or "the views show its first" in status


def _kept(status: str) -> bool:
    return status == ""


def _drawn_or_limited(status: str) -> bool:
    """Drawn (the status left alone, or saying at which threshold), or stopped or refused by a limit
    that the message names."""
    text = status.replace("&#x27;", "'")
    return text == "" or any(said in text for said in SAID)
