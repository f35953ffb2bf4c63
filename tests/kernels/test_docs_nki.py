"""docs/nki.md's code blocks run as they stand, in order, in one namespace."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "nki.md"


def test_the_code_blocks_of_the_nki_page_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 4
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    printed = capsys.readouterr().out
    assert "[partition-dim]" in printed and "loss" in printed
