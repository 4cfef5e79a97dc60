"""Attention Explorer web app: `python app.py` serves it on 127.0.0.1:7860 (GRADIO_SERVER_NAME/PORT)."""

import os

from explorer.app import memory
from explorer.app.ui import build_demo

if "MALLOC_ARENA_MAX" not in os.environ:  # what the variable would do, for the threads still to come
    memory.limit_arenas(2)
demo = build_demo()

if __name__ == "__main__":
    demo.launch()
