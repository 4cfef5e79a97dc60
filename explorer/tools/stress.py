"""`python -m explorer.stress`: the app under load and hostile input, on 127.0.0.1.

Starts the app in a subprocess (any model allowed, so hostile checkpoints reach the loader; a memory
budget of `--budget-gb`) and drives it over plain HTTP from threads, every request bounded in time:

    concurrent  visitors running prompts and switching layers and heads, each in a session of its own
    prompts     hostile prompts: 10 MB and 50 MB, a lone surrogate, markup, blank, emoji
    configs     hostile checkpoints: 10⁶ layers, 4.5 layers, a pickle renamed, a shard outside, a
                foreign config, a path too long, a path that is not there
    memory      one model under four spellings, models that together pass the budget, a prompt at the
                app's token limit whose maps must be computed block by block, and its layer switches
    probe       what an outside probe got through (issue 24): 10 MB patching answer, distractor and
                prompt, a GGUF listing 10⁷ tokens for 263 embeddings, a tokenizer.json of 400,000 added
                tokens, one giving ids past the vocabulary, and loads from fresh sessions of one address
    burst       more requests at once than the queue holds
    queue, disk, expensive, and Gemma 3 configs: round three (issue 38), `explorer.tools.stress_limits`
    outside, kinds, expiry, forged, doors: round four (issue 52), `explorer.tools.stress_doors`, on a
                server of its own started as a Space's; its table printed after the others

The server runs with a Space's bound on each request (`EXPLORER_REQUEST_SECONDS=60`) and starts beside a
HF cache holding a config.json nested 400,000 deep and a snapshot link loop. Visitors come from addresses
of their own (127.0.0.2 and on), as loads a minute are counted by address; the server allows 60 loads a
minute in all, so that the run's own loads pass. Each probe request is
also listed with what it cost: its time, `GET /` while it ran, and the server's RSS.

A request fails when it errors, times out or answers other than expected (a refusal with its clear
message is the expected answer to hostile input). Meanwhile `GET /` is timed every 0.25 s and the
server's resident memory sampled. The table printed at the end is docs/stress.md's. `--repo` serves the
app of another checkout (its own code, the same requests), to compare two versions of the code.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from explorer.app import memory
from explorer.tools.stress_client import App, Monitor, guard, status_of, wait_until_up
from explorer.tools.stress_doors import RoundFour
from explorer.tools.stress_files import make_checkpoints
from explorer.tools.stress_limits import RoundThree, write_round_three_files
from explorer.tools.stress_report import Result, report

ROOT = Path(__file__).resolve().parents[2]
SERVE = "import sys, app; app.demo.launch(server_name='127.0.0.1', server_port=int(sys.argv[1]), quiet=True)"
# What a layer switch also reads, after its four positions: the zoom's window and the Generate tab's step
# (views that follow the switch; gradio_client fills them in, a raw call sends them).
FOLLOWED = [0, 0, 0, 0, 0]
LINE = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. "
PER_VISITOR = 8  # the server's EXPLORER_QUEUE_PER_VISITOR (the default)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stress:
    def __init__(self, url: str, timeout: float, paths: dict[str, Path], clients: int, max_tokens: int):
        self.url, self.timeout, self.paths, self.clients, self.max_tokens = (
            url,
            timeout,
            paths,
            clients,
            max_tokens,
        )
        self.results: list[Result] = []
        self._lock = threading.Lock()
        self._apps: dict[str, App] = {}
        self._addresses = (f"127.0.0.{i}" for i in itertools.count(2))

    def address(self) -> str:
        """An address no visitor used before (127.0.0.2, .3, …)."""
        with self._lock:
            return next(self._addresses)

    def app(self, address: str, timeout: float | None = None) -> App:
        """The client of `address`, made with `timeout` (the run's, by default) when first asked for."""
        with self._lock:
            return self._apps.setdefault(address, App(self.url, timeout or self.timeout, address))

    def record(self, category: str, name: str, start: float, ok: bool, detail: str = "") -> Result:
        """A result measured otherwise than by one event (joins counted, files left on disk)."""
        result = Result(category=category, name=name, start=start, end=time.monotonic(), ok=ok, detail=detail)
        with self._lock:
            self.results.append(result)
        return result

    def request(self, category, name, api, data, expect, session=None, body=None, address=None) -> Result:
        """One event, from `address` (a new one if not given); `expect(status_text)` says whether its
        answer is the right one."""
        app = self.app(address or self.address())
        start = time.monotonic()
        ok, outputs = app.call(api, data, session, body)
        status = status_of(outputs) if ok else str(outputs)
        answered = ok or "Queue is full" in status  # the queue's refusal is an answer, if one expected
        good = answered and expect(status) and "Something went wrong" not in status
        result = Result(
            category=category,
            name=name,
            start=start,
            end=time.monotonic(),
            ok=good,
            detail=status[:160],
            answer_bytes=len(json.dumps(outputs, ensure_ascii=False).encode()),
        )
        with self._lock:
            self.results.append(result)
        return result

    def visitor(self, number: int) -> None:
        session, address = uuid.uuid4().hex, self.address()
        for i in range(4):
            text = f"{LINE * (1 + (number + i) % 4)} Visitor {number}, prompt {i}."
            self.request("concurrent", "run", "run", [text, 0, 0], _ran, session, address=address)
            for layer, head in ((1 + i % 3, number % 8), (0, (number + 3) % 8)):
                switch = [layer, head, 1, 0, *FOLLOWED]
                self.request("concurrent", "layer", "layer", switch, _kept, session, address=address)

    def hostile_prompts(self) -> None:
        cases = {
            "10 MB prompt": LINE * (10_000_000 // len(LINE)),
            "50 MB prompt": LINE * (50_000_000 // len(LINE)),
            "markup": "<script>alert(1)</script><img src=x onerror=alert(2)> & <b>",
            "emoji": "🙂👍🏽 naïve café 日本語 " * 20,
        }
        for name, text in cases.items():
            self.request("prompts", name, "run", [text, 0, 0], _ran)
        self.request("prompts", "blank", "run", ["  \n\t ", 0, 0], _says("prompt is empty"))
        body = '{"data": ["to be \\ud800 or not", 0, 0]}'
        self.request("prompts", "lone surrogate", "run", [], _says("lone surrogate"), body=body)

    def hostile_configs(self) -> None:
        expected = {
            "deep": "n_layers is 1,000,000",
            "fractional": "n_layers must be a whole number",
            "foreign": "model_type 'secret-value-42' is not supported",
            "pickled": "not a safetensors file",
            "escaping": "names a shard",
        }
        for name, message in expected.items():
            self.request("configs", name, "load_model", [str(self.paths[name])], _says(message))
        self.request(
            "configs", "path too long", "load_model", ["/" + "a" * 5000], _says("at most 1,024 characters")
        )
        self.request("configs", "no such path", "load_model", ["/no/such/model"], _says("No directory"))

    def memory_pressure(self) -> None:
        long, session, address = self.paths["long"], uuid.uuid4().hex, self.address()
        visit = dict(session=session, address=address)
        for spelling in (str(long), f"{long}/.", f"{long}/./.", f"{long}//"):  # one model, loaded once
            self.request("memory", "spellings", "load_model", [spelling], _says("Loaded"), **visit)
        text = LINE * (self.max_tokens // 16)  # past the app's token limit
        self.request("memory", "run at the token limit", "run", [text, 0, 0], _truncated, **visit)
        for layer, head in ((1, 3), (2, 7), (3, 0)):  # positions within the sliders' first range
            switch = [layer, head, 1, 0, *FOLLOWED]
            self.request("memory", "layer switch at the limit", "layer", switch, _kept, **visit)
        self.request("memory", "overview at the limit", "overview", [], _kept, **visit)
        for name in ("wide", *(f"wide-{i}" for i in range(1, 6))):  # together past the budget: evictions
            visit = dict(session=uuid.uuid4().hex, address=self.address())
            source = [str(self.paths[name])]
            self.request("memory", "load a wide model", "load_model", source, _says("Loaded"), **visit)
            self.request("memory", "run a wide model", "run", [LINE * 8, 0, 0], _ran, **visit)

    def probe(self) -> None:
        """What an outside probe got through (issue 24), each answered at once with a brief message."""
        clean, corrupted = (
            "To be, or not to be, that is the question",
            "To be, or not to go, that is the question",
        )
        huge = "x" * 10_000_000
        for name, words, says in (
            ("10 MB answer", [clean, corrupted, huge, " be"], "characters long"),
            ("10 MB distractor", [clean, corrupted, " the", huge], "characters long"),
            ("10 MB clean prompt", [huge, corrupted, " the", " be"], "longer than"),
        ):
            self.request("probe", name, "patch", words, _briefly(says), session=uuid.uuid4().hex)
        too_many = f"at most {2**21:,} are read"
        self.request(
            "probe", "GGUF of 10⁷ tokens", "load_model", [str(self.paths["tokens.gguf"])], _says(too_many)
        )
        added = "at most 65,536 tokens and 1,048,576 bytes are built"
        self.request(
            "probe", "400k added tokens", "load_model", [str(self.paths["added-tokens"])], _says(added)
        )
        visit = dict(session=uuid.uuid4().hex, address=self.address())
        past = [str(self.paths["past-vocab"])]
        self.request(
            "probe", "ids past the vocabulary", "load_model", past, _says("outside the model's"), **visit
        )
        self.request(
            "probe", "a prompt holding one", "run", ["To be <past-the-vocabulary>", 0, 0], _ran, **visit
        )
        address = self.address()  # one visitor reconnecting: a new session each time
        for i in range(5):
            expect = _says("Loaded") if i < 3 else _says("from one address")
            source = [str(self.paths[f"fresh-{i}"])]
            self.request("probe", "load from a fresh session", "load_model", source, expect, address=address)

    def burst(self, count: int) -> None:
        def one(i):
            text = f"Burst {i}: {LINE * 2}"
            return self.request("burst", "run", "run", [text, 0, 0], _ran_or_queue_full)

        with ThreadPoolExecutor(count) as pool:
            list(pool.map(one, range(count)))


def _ran(status: str) -> bool:
    return "one fast forward" in status or _truncated(status)


def _truncated(status: str) -> bool:
    return "the views show its first" in status  # markup.truncation


def _kept(status: str) -> bool:
    return status == ""  # a switch leaves the status line alone when all is well


def _says(message: str):
    return lambda status: message in status.replace("&#x27;", "'")


def _briefly(message: str):
    return lambda status: message in status and len(status.encode()) < 1024


def _ran_or_queue_full(status: str) -> bool:
    return _ran(status) or "Queue is full" in status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.stress", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=6, help="concurrent visitors")
    parser.add_argument("--budget-gb", type=float, default=2.0, help="EXPLORER_MEMORY_GB of the server")
    parser.add_argument("--max-tokens", type=int, default=2048, help="EXPLORER_MAX_TOKENS of the server")
    parser.add_argument("--burst", type=int, default=80, help="requests sent at once (the queue holds 64)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one request may take")
    parser.add_argument(
        "--slow-timeout",
        type=float,
        default=900.0,
        help="seconds one of round three's may take, queue included",
    )
    parser.add_argument("--rest", type=float, default=8.0, help="seconds idle before resting RSS is read")
    parser.add_argument("--guard-gb", type=float, default=8.0, help="the server is killed past this RSS")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose app is served")
    parser.add_argument("--skip", nargs="*", default=[], help="categories to leave out")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small models, few requests")
    args = parser.parse_args(argv)
    if args.quick:  # round four's expiry waits out the queue's 30 s twice: it is no smoke test
        args.clients, args.burst, args.rest, args.max_tokens = 2, 4, 1.0, 256
        args.skip = [*args.skip, "expiry"]

    budget = args.budget_gb * 1e9
    with tempfile.TemporaryDirectory(prefix="explorer-stress-") as folder:
        print("writing the checkpoints …", file=sys.stderr, flush=True)
        sizes = dict(wide_mlp=256, added=100_000, gguf_tokens=2_200_000) if args.quick else {}
        paths = make_checkpoints(Path(folder), context=args.max_tokens, **sizes)
        paths |= write_round_three_files(Path(folder))
        downloads = Path(folder) / "gradio"
        env = {**os.environ, "EXPLORER_MODELS": "any", "EXPLORER_MEMORY_GB": str(args.budget_gb)}
        env |= {"EXPLORER_MAX_TOKENS": str(args.max_tokens), "GRADIO_ANALYTICS_ENABLED": "False"}
        env |= {"EXPLORER_SERVER_LOADS_PER_MINUTE": "60"}  # the run's own loads; 3 per address stays
        env |= {"EXPLORER_REQUEST_SECONDS": "60", "HF_HUB_CACHE": str(paths["hub"])}
        env |= {"GRADIO_TEMP_DIR": str(downloads), "EXPLORER_QUEUE_PER_VISITOR": str(PER_VISITOR)}
        env.pop("SPACE_ID", None)
        rounds = []
        with _served(args, env) as (server, url, monitor, baseline):
            stress = Stress(url, args.timeout, paths, args.clients, args.max_tokens)
            three = RoundThree(stress, paths, downloads, PER_VISITOR, args.slow_timeout)
            phases = {
                "concurrent": lambda: _together(stress.visitor, range(args.clients)),
                "prompts": stress.hostile_prompts,
                "configs": lambda: (stress.hostile_configs(), three.configs()),
                "memory": stress.memory_pressure,
                "probe": stress.probe,
                "burst": lambda: stress.burst(args.burst),
                "queue": three.queue,
                "disk": three.disk,
                "expensive": three.expensive,
            }
            busy = _run_phases(phases, args.skip, server)
            rounds.append((stress, monitor, baseline, _resting(monitor, args.rest), busy))
        # round four as the probe met it: a Space's server (the proxy's address read, uploads open)
        space = {**env, "SPACE_ID": "explorer/stress", "EXPLORER_MODELS": "any"}
        space["GRADIO_TEMP_DIR"] = str(Path(folder) / "gradio-space")
        with _served(args, space) as (server, url, monitor, baseline):
            stress = Stress(url, args.timeout, paths, args.clients, args.max_tokens)
            four = RoundFour(stress, Path(space["GRADIO_TEMP_DIR"]), paths["long"], args.slow_timeout)
            phases = {
                "outside": four.outside,
                "kinds": four.kinds,
                "expiry": four.expiry,
                "forged": four.forged,
                "doors": four.doors,
            }
            if set(phases) - set(args.skip):
                busy = _run_phases(phases, args.skip, server)
                rounds.append((stress, monitor, baseline, _resting(monitor, args.rest), busy))
    results = [r for stress, *_ in rounds for r in stress.results]
    for stress, monitor, baseline, resting, busy in rounds:
        if stress.results:
            print(report(stress.results, monitor, budget, baseline, resting, busy))
    for result in results:
        if not result.ok:
            print(f"FAILED {result.category} / {result.name} ({result.seconds:.1f} s): {result.detail}")
    return 1 if any(not r.ok for r in results) else 0


@contextlib.contextmanager
def _served(args, env: dict):
    """The app of `args.repo` served with `env`, its memory guarded and watched: (process, url, monitor,
    startup RSS); stopped after."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(port)],
        cwd=args.repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until_up(url, server)
        baseline = memory.rss_bytes(server.pid)
        monitor = Monitor(url, server.pid)
        monitor.start()
        limit = args.guard_gb * 1e9
        threading.Thread(target=guard, args=(server, limit, monitor.stop), daemon=True).start()
        yield server, url, monitor, baseline
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


def _run_phases(phases: dict, skip: list[str], server: subprocess.Popen) -> float:
    """Each phase not skipped, while the server lives: the seconds they took."""
    started = time.monotonic()
    for name, phase in phases.items():
        if name not in skip and server.poll() is None:
            print(f"{name} …", file=sys.stderr, flush=True)
            phase()
    return time.monotonic() - started


def _resting(monitor: Monitor, rest: float) -> int:
    """The server's RSS after `rest` idle seconds; the monitor stopped."""
    time.sleep(rest)
    resting = memory.rss_bytes(monitor.pid)
    monitor.finish()
    return resting


def _together(work, items) -> None:
    with ThreadPoolExecutor(len(items)) as pool:
        list(pool.map(work, items))


if __name__ == "__main__":
    sys.exit(main())
