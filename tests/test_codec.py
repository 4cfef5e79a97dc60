"""The wire format's two ends held to one set of fixtures (tests/codec_fixtures.py): the Python encoder
still writes each fixture as it is, and the page's decoder (explorer/app/ui/assets/codec.mjs, under
`node --test`) turns each back into the figure's values."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from explorer.figures import codec
from tests import codec_fixtures

ROOT = Path(__file__).resolve().parent.parent
DECODER = ROOT / "explorer" / "app" / "ui" / "assets" / "codec.mjs"


def assert_same(actual, expected, where: str = "") -> None:
    """Equal, each typed array's values within float32 rounding (an 8-bit code within one step): the
    fixtures' numbers come from numpy's float32 sums, which another CPU may round otherwise."""
    if isinstance(expected, dict) and "bdata" in expected:
        assert isinstance(actual, dict) and {k: v for k, v in actual.items() if k != "bdata"} == {
            k: v for k, v in expected.items() if k != "bdata"
        }, where
        a, e = codec.map_array(actual), codec.map_array(expected)
        if e.dtype == np.uint8:
            np.testing.assert_allclose(a.astype(int), e.astype(int), atol=1, err_msg=where)
        else:
            np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7, err_msg=where)
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), where
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, f"{where}[{i}]")
    elif isinstance(expected, float):
        assert actual == pytest.approx(expected, rel=1e-6, abs=1e-9), where
    else:
        assert actual == expected, where


@pytest.mark.parametrize("name", sorted(codec_fixtures.fixtures()))
def test_the_encoder_still_writes_each_fixture(name):
    written = json.loads(codec_fixtures.text(codec_fixtures.fixtures()[name]))
    on_disk = json.loads((codec_fixtures.FOLDER / name).read_text(encoding="utf-8"))
    assert on_disk["version"] == codec.WIRE_VERSION, (
        "write the fixtures again: python -m tests.codec_fixtures"
    )
    if name == "heads.json":  # deflated bytes differ with zlib's build: compare them inflated
        written["differences"], on_disk["differences"] = (
            [codec_fixtures.inflated(d) for d in side["differences"]] for side in (written, on_disk)
        )
    assert_same(written, on_disk, name)


def test_the_page_reads_the_constants_the_server_writes():
    """The page's shared.mjs is what explorer/figures/page_constants.py writes (the wire format's
    version, SHORT_END): written once, never by hand; the decoder and the labels import it."""
    from explorer.figures import page_constants

    assert page_constants.PAGE_MODULE.read_text(encoding="utf-8") == page_constants.page_module(), (
        "write it again: python -m explorer.figures.page_constants, then rebuild the component"
    )
    assert page_constants.CONSTANTS["VERSION"][0] == codec.WIRE_VERSION
    for module, name in ((DECODER, "VERSION"), (DECODER.with_name("labels.mjs"), "SHORT_END")):
        text = module.read_text(encoding="utf-8")
        assert f'import {{ {name} }} from "./shared.mjs";' in text and f"export const {name}" not in text


def test_every_fixture_has_a_map_to_rebuild_of_each_rule():
    rules = set()
    for fixture in codec_fixtures.fixtures().values():
        for trace in fixture.get("sent", []):
            meta = trace.get("meta") or {}
            rules |= {meta["derived"]["op"]} if "derived" in meta else set()
            rules |= {"packed"} if "packed" in meta else set()
            rules |= {"weighted"} if "weighted" in meta else set()
    assert rules == {"scale", "same", "causal", "angles", "packed", "weighted"}


def test_the_page_modules_pass_their_node_tests():
    """Every tests/*.test.mjs: the decoder against the fixtures, and the page's other pure logic."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (apt-get install -y nodejs): the page's modules are not tested")
    done = subprocess.run(
        [node, "--test", str(ROOT / "tests")], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert re.search(r"^# pass [1-9]", done.stdout, re.M), done.stdout[-2000:]
