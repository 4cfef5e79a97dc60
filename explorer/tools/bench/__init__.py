"""The benchmark (`python -m explorer.bench`): each contender measured alone in a fresh process.

common     shapes, a seeded checkpoint, the machine, the prompt ids, running a worker
worker     one contender, measured alone (first view, layer switch, transformers, TransformerLens)
report     ratios, targets and the Markdown table
patching   the head-patching sweep against one forward per head
generate   tokens per second of generation against transformers'
browser    what a person waits for in Chromium
"""
