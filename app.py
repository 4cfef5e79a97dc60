"""Attention Explorer web app: `python app.py` serves it on 127.0.0.1:7860 (GRADIO_SERVER_NAME/PORT)."""

from explorer.ui import build_demo

demo = build_demo()

if __name__ == "__main__":
    demo.launch()
