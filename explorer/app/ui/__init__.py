"""The Gradio app: wiring only. Figures come from `explorer.views`, HTML from `explorer.markup`, runs
from the shared `explorer.cache.Workspace`.

`layout` builds the page (prompt, model picker, layer and head, the tabs) and wires what every view
shares: Run, a layer or head switch, a model load. Each tab is a module of its own (`attention`,
`rope`, `gqa`, `faithfulness`, `overview`, `generate`) that lays out its plots and wires its own events.
"""

from explorer.app.ui.layout import build_demo

__all__ = ["build_demo"]
