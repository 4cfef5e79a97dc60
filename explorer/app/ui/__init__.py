"""The page, wiring only: figures come from `explorer.views`, HTML from `explorer.app.markup`, runs from
the shared `explorer.app.workspace.Workspace`.

`layout` lays out the page (prompt, model picker, layer and head, the tabs) and `events` wires what every
view shares: Run, a layer or head switch, a picked head, a link. Each tab is a module of its own
(`attention`, `rope`, `gqa`, `faithfulness`, `overview`, `intervene`, `generate`) that lays out its plots
and wires its own events; loading a model is `model_loading`, links are `share`, the page's own style and
script `page` (with `assets/`).
"""

from explorer.app.ui.layout import build_demo

__all__ = ["build_demo"]
