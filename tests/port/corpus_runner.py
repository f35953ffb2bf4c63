"""Runs the rewritten corpus in one process, as a user would run each script (`python x.py
--out ...`) or notebook (its code cells, magics left out), and leaves each result in OUT_DIR.
Usage: python corpus_runner.py --device cpu|neuron OUT_DIR [--original] NAME... (NAME: a file
in corpus/; --original: unfixed programs, with the arguments they need on the CPU).
The device is checked, so the two runs cannot both be on the same one without failing."""

import json
import os
import runpy
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
PYTHON_CELL_MAGICS = ("%%time", "%%timeit", "%%capture")


def run_notebook(path, out):
    namespace = {"__name__": "__main__"}
    for cell in json.load(open(path))["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or (source.startswith("%%")
                                           and not source.startswith(PYTHON_CELL_MAGICS)):
            continue
        lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
        exec(compile("\n".join(lines), path, "exec"), namespace)
    with open(out, "w") as f:
        json.dump(namespace["result"], f)


def check_device(device):
    import torch

    if device == "neuron":
        import torchneuron  # noqa: F401 - torch autoloads it; explicit in case it is not installed
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    found = accelerator.type if accelerator is not None else "cpu"
    assert found == device, f"asked to run on {device}, but the accelerator is {found}"


# Arguments an original (unfixed) program needs to run at all on the CPU, where the fixed one
# runs with its defaults.
ORIGINAL_ARGS = {"regress_backend.py": ["--backend", "gloo"]}


def main(out_dir, names):
    original = names[:1] == ["--original"]
    for name in names[1:] if original else names:
        path = os.path.join(HERE, name)
        out = os.path.join(out_dir, name + ".json")
        if name.endswith(".ipynb"):
            run_notebook(path, out)
        else:
            extra = ORIGINAL_ARGS.get(name, []) if original else []
            sys.argv = [path, "--out", out, *extra]
            runpy.run_path(path, run_name="__main__")


if __name__ == "__main__":
    assert sys.argv[1] == "--device"
    check_device(sys.argv[2])
    main(sys.argv[3], sys.argv[4:])
