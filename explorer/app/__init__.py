"""The Gradio app: a workspace of models and runs shared by every visitor (`workspace`), bounded by what
the operator allows (`policy`, `memory`), the HTML it writes (`markup`), what it sends for a figure
(`payload`), and the page (`ui.build_demo`: one module per tab, wiring only). Figures come from
`explorer.views`."""
