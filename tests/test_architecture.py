"""The code keeps the shape it claims: imports go one way, the residual block is written once, and the
package's top level stays small."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "explorer"
MAX_TOP_LEVEL_MODULES = 10
MAX_MODULE_LINES = 400


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, for its __init__)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports, at the top or inside a function alike. `from a.b
    import c` reads a.b (its __init__) and a.b.c when that is a module. A package's own modules may
    import the package (its __init__ runs first anyway); that edge is left out."""
    known = modules()

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                resolved = resolve(target) if target.split(".")[0] == "explorer" else None
                if resolved and resolved != name and not name.startswith(resolved + "."):
                    edges.add(resolved)
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_module_of_the_package_imports_itself_back():
    graph = import_graph()
    assert len(graph) > 40 and graph["explorer.engine.run"]  # the graph was read
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_imports_go_one_way_between_the_layers():
    """engine <- loading <- explorer (Explorer, load); engine <- figures <- views <- app: figures know
    no engine but token text, the engine knows no loading, views, figures, app or tools, and nothing
    but the tools imports the tools."""
    graph = import_graph()
    for module, targets in graph.items():
        for target in targets:
            if module.startswith("explorer.engine"):
                assert not target.startswith(("explorer.loading", "explorer.explorer")), (module, target)
            if module.startswith(("explorer.engine", "explorer.loading")):
                assert not target.startswith(("explorer.views", "explorer.figures", "explorer.app")), module
            if module.startswith("explorer.figures"):
                allowed = ("explorer.figures", "explorer.engine.tokens")
                assert target.startswith(allowed), (module, target)
            if module.startswith("explorer.views"):
                assert not target.startswith("explorer.app"), (module, target)
            if target.startswith("explorer.tools"):
                assert module.startswith("explorer.tools") or module in (
                    "explorer.bench",
                    "explorer.train",
                    "explorer.stress",
                ), module


def test_figures_and_views_import_no_gradio_and_figures_no_torch():
    for path in (PACKAGE / "figures").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import|from) (torch|gradio)\b", text, re.M), path
    for path in (PACKAGE / "views").rglob("*.py"):
        assert not re.search(r"^\s*(import|from) gradio\b", path.read_text(encoding="utf-8"), re.M), path


def test_importing_the_figures_loads_no_torch():
    """Figures are numpy in, Plotly out: the package's public names are read lazily, so importing
    `explorer.figures` runs no engine module that needs torch."""
    code = "import sys, explorer.figures; print(sorted(m for m in ('torch', 'gradio') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_blocks_norms_and_mlp_are_called_in_the_model_module_alone():
    """The residual block is written once: every other path (runs, generation, interventions, the
    eager rerun, head scores) goes through the model's forward or the block's own methods."""
    calls = re.compile(r"\b(input_layernorm|post_attention_layernorm|mlp)\(|(?<!linalg)\.norm\(")
    where = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if calls.search(path.read_text(encoding="utf-8"))
    }
    assert where == {"engine/model.py"}


def code_lines(path: Path) -> list[str]:
    """A module's lines of code: its docstrings and comments left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prose = {
        line
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for line in range(node.lineno, node.end_lineno + 1)
    }
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.split("#")[0] for number, line in enumerate(lines, 1) if number not in prose]


def test_the_mask_and_the_softmax_of_scores_are_written_once():
    """engine/rows.py alone masks scores with −∞ and softmaxes them, and builds the mask (the fast
    path's SDPA takes the same `attention_mask`): every reading calls it. The engine's other softmaxes
    are of logits (the lens, sampling, the next-token distribution); the views compute none."""
    stage = re.compile(r"-inf|-math\.inf|-torch\.inf|softmax\(|\.exp_\(")
    for path in (PACKAGE / "engine").rglob("*.py"):
        if path.name != "rows.py":
            for line in code_lines(path):
                assert not stage.search(line) or "logits" in line, (path.name, line)
    for path in (PACKAGE / "views").rglob("*.py"):
        assert not [
            line for line in code_lines(path) if re.search(r"softmax\(|\.exp_\(|masked_fill_?\(.*inf", line)
        ], path
    masks = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if any(re.search(r"\battention_mask\(", line) for line in code_lines(path))
    }
    assert masks == {"engine/rows.py", "engine/model.py"}


def test_the_top_level_stays_small_and_no_module_passes_400_lines():
    top = [path.name for path in PACKAGE.glob("*.py")]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    long = {
        path.relative_to(PACKAGE).as_posix(): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_every_error_meant_for_a_person_lives_in_one_module():
    defined = {
        node.name: path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Error")
    }
    assert set(defined.values()) == {"errors.py"}, defined


TOASTS = {"Warning", "Info", "Error", "Success"}  # Gradio's toasts, each drawn as HTML


def makes_a_toast(node: ast.AST) -> bool:
    """Whether `node` calls one of Gradio's toasts (`gr.Warning(…)`, `gradio.exceptions.Error(…)`)
    or imports one by name from gradio."""
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "gradio" and bool(TOASTS & {a.name for a in node.names})
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in TOASTS
        and ast.unparse(node.func.value).split(".")[0] in ("gr", "gradio")
    )


def test_every_toast_is_made_through_the_one_escaping_module():
    """app/ui/toasts.py alone makes a toast, escaping its message, so none can draw a person's text
    (a link's target of `<img src=…>`) as markup."""
    made = {
        path.relative_to(PACKAGE).as_posix()
        for path in (PACKAGE / "app").rglob("*.py")
        if any(makes_a_toast(node) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert made == {"app/ui/toasts.py"}


# Gradio's controls that check a value themselves: a choice control quotes one that is not a choice,
# unescaped, in a toast drawn as HTML; a number control fails on text naming no control.
CHECKED_CONTROLS = {"Radio", "Dropdown", "CheckboxGroup", "Number", "Slider"}


def builds_a_plain_control(node: ast.AST) -> bool:
    """Whether `node` builds or subclasses one of Gradio's own checked controls (`gr.Radio(…)`,
    `gradio.components.Dropdown(…)`, `class X(gr.Slider)`) or imports one by name from gradio.
    An annotation naming one (`metric: gr.Radio`) builds nothing."""
    if isinstance(node, ast.ImportFrom):
        names = {alias.name for alias in node.names}
        return (node.module or "").split(".")[0] == "gradio" and bool(CHECKED_CONTROLS & names)
    if isinstance(node, ast.Call):
        named = [node.func]
    elif isinstance(node, ast.ClassDef):
        named = node.bases
    else:
        return False
    return any(
        isinstance(name, ast.Attribute)
        and name.attr in CHECKED_CONTROLS
        and ast.unparse(name.value).split(".")[0] in ("gr", "gradio")
        for name in named
    )


def test_every_choice_and_number_control_is_built_from_the_checked_ones():
    """app/ui/inputs.py alone builds Gradio's Radio, Dropdown, CheckboxGroup, Number and Slider: every
    other module builds its checked versions, which refuse a value no control could send by the
    control's name, escaped, before Gradio's own check quotes it as markup. A handler changes a control
    with `gr.update(…)`, which builds none."""
    built = {
        path.relative_to(PACKAGE).as_posix()
        for path in (PACKAGE / "app").rglob("*.py")
        if any(builds_a_plain_control(node) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert built == {"app/ui/inputs.py"}


def test_the_control_finder_finds_each_way_of_building_one():
    for code in (
        "gr.Radio(['a'])",
        "gradio.components.Dropdown(choices=[])",
        "class Ticks(gr.CheckboxGroup): pass",
        "from gradio import Number",
        "from gradio.components import Slider as S",
    ):
        assert any(builds_a_plain_control(node) for node in ast.walk(ast.parse(code))), code
    for code in ("metric: gr.Radio = None", "gr.update(choices=[])", "checked.Radio(['a'])", "gr.Textbox()"):
        assert not any(builds_a_plain_control(node) for node in ast.walk(ast.parse(code))), code


def writes_through_attributes(path: Path) -> set[str]:
    """Every assignment in a module through another object's attribute (`a.b = …`, `a.b += …`,
    `a.b[k] = …`, the root not `self` or `cls`), as its target's text."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            base = target
            while isinstance(base, ast.Subscript):
                base = base.value
            root = base
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if isinstance(base, ast.Attribute) and getattr(root, "id", None) not in ("self", "cls"):
                found.add(ast.unparse(target))
    return found


def test_no_writes_run_back_up_from_the_engine_views_and_figures():
    """Below the app, no code writes into an object it was handed: a view keeps what it derives from a
    run through `Run.memo`, and the model counts its own forwards (`Transformer.forward_count`, which the
    Explorer reads). The writes left are into objects the function made itself."""
    made_here = {  # module -> its writes into an object it made itself
        "engine/tokens.py": {"text.hover"},  # the Encoded it builds
        "engine/deadline.py": {"outer.at"},  # the bound it opened, as the context closes
        "engine/rows.py": {"one.__dict__[stage]"},  # a head's rows, their stages cut from its layer's
        "engine/run.py": {"moved.__dict__['probs']"},  # a copy on the CPU, its computed stage kept
        "figures/attention.py": {"pipeline_figure.plot.__signature__", "pipeline_figure.__signature__"},
    }
    found = {}
    for layer in ("engine", "views", "figures"):
        for path in (PACKAGE / layer).rglob("*.py"):
            name = path.relative_to(PACKAGE).as_posix()
            if writes := writes_through_attributes(path) - made_here.get(name, set()):
                found[name] = writes
    assert found == {}
    assert writes_through_attributes(PACKAGE / "explorer.py") == set()  # its forward count is the model's


def test_the_write_finder_finds_each_way_of_writing():
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "m.py"
        path.write_text("run.kept[1] = 2\nex.forward_count += 1\nx.a: int = 0\nself.b = 1\nc = 2\n")
        assert writes_through_attributes(path) == {"run.kept[1]", "ex.forward_count", "x.a"}


def test_every_event_of_more_than_one_input_is_wired_by_name(gqa_checkpoint):
    """No handler reads an input's value by its place in a list: an event of several inputs calls a
    function of `wiring.named`, which hands the handler each value under its key, and Gradio (and the
    API) sees one parameter per input, named by it."""
    from gradio.utils import get_positional_input_parameters

    from explorer.app.ui import build_demo
    from explorer.app.workspace import Workspace

    demo = build_demo(Workspace(gqa_checkpoint, device="cpu"))
    several = [event for event in demo.fns.values() if event.fn is not None and len(event.inputs) > 1]
    assert len(several) > 50  # the page's events were read
    by_place = [event.fn.__name__ for event in several if not hasattr(event.fn, "named_inputs")]
    assert by_place == []
    for event in several:
        names = [parameter.name for parameter in get_positional_input_parameters(event.fn)]
        assert names == list(event.fn.named_inputs), event.fn.__name__
        assert len(names) == len(event.inputs), event.fn.__name__


def has_anchors(css: str) -> list[str]:
    """The compound selector each `:has(` in `css` is anchored on (what stands before it, back to the
    last combinator, comma or brace), comments left aside."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    return [re.split(r"[\s,{}>+~()]", css[: m.start()])[-1] for m in re.finditer(r":has\(", css)]


def test_every_has_in_the_pages_css_is_anchored_on_one_element():
    """A `:has()` anchored on the body (or any element matched by tag or class) is checked again against
    its whole subtree on every change to the page: each text Plotly measures then costs a walk of the
    page. Anchored on an element by id, it is checked only when that element's own content changes."""
    styles = [*(PACKAGE / "app" / "ui" / "assets").glob("*.css")]
    styles += (PACKAGE.parent / "components" / "plot_view" / "frontend").glob("*.svelte")
    anchors = {path.name: has_anchors(path.read_text()) for path in styles}
    assert anchors["page.css"], "page.css anchors Stop's `:has()` on the status line"
    for name, found in anchors.items():
        assert all(re.fullmatch(r"#[\w-]+", anchor) for anchor in found), (name, found)


def test_the_anchor_finder_reads_each_kind_of_anchor():
    css = "body:has(#s .p) #x { } /* a:has() */ #status:has(.p) + #y { } a, div.c:not(:has(> b)) { }"
    assert has_anchors(css) == ["body", "#status", ""]
