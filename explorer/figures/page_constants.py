"""The constants the page's modules share with the server, written here once.

The page reads them from `explorer/app/ui/assets/shared.mjs`, which this module writes
(`python -m explorer.figures.page_constants`, then rebuild the component: the build bundles it) and
`tests/test_codec.py` holds to it: the wire format's version, and where a token's tick label ends and
its hover part goes on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from explorer.figures.codec import WIRE_VERSION
from explorer.figures.common import SHORT_END

PAGE_MODULE = Path(__file__).resolve().parents[1] / "app" / "ui" / "assets" / "shared.mjs"
CONSTANTS = {  # name in the page -> (value, what it is)
    "VERSION": (WIRE_VERSION, "The wire format's version (figures/codec.py WIRE_VERSION)."),
    "SHORT_END": (SHORT_END, "Where a token's tick label ends and its hover part goes on."),
}


def page_module() -> str:
    """The text of `shared.mjs`: each constant exported with its value as JSON writes it."""
    lines = [
        "// @ts-check",
        "// Written by explorer/figures/page_constants.py: the constants the page shares with the server.",
        "// Not edited by hand: change them there, write this again, rebuild the component.",
    ]
    for name, (value, said) in CONSTANTS.items():
        lines += ["", f"/** {said} */", f"export const {name} = {json.dumps(value)};"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    PAGE_MODULE.write_text(page_module(), encoding="utf-8")
    sys.exit(0)
