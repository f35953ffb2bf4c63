"""The port tool is a pure source tool: its own modules never import torch."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# torchneuron/__init__.py registers the device (and so imports torch); stand in for it to see
# what the port package itself pulls in.
PROBE = f"""
import sys, types
package = types.ModuleType("torchneuron")
package.__path__ = [{os.path.join(REPO, "torchneuron")!r}]
sys.modules["torchneuron"] = package
import torchneuron.port.cli, torchneuron.port.engine
assert torchneuron.port.cli.main(["check", {os.path.join(REPO, "tests", "port", "corpus")!r}]) == 1
print("torch" in sys.modules)
"""


def test_port_does_not_import_torch():
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "False"
