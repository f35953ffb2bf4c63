# Builds torchneuron._C against the torch that is already installed (no build isolation):
# the extension must match that torch's ABI exactly.
import glob
import os

from setuptools import setup

# Building imports torch, and torch imports every installed `torch.backends` entry point, this
# package included, whose _C is what is being built: keep torch from loading it here.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sources = sorted(glob.glob(os.path.join("csrc", "**", "*.cpp"), recursive=True))

# `make` builds the extension in place with `setup.py build_ext --inplace` (ninja keeps it
# incremental) and installs the package metadata separately with TORCHNEURON_BUILD_EXT=0, because
# an editable pip install compiles from scratch in a throwaway directory every time.
BUILD_EXT = os.environ.get("TORCHNEURON_BUILD_EXT", "1") != "0"

setup(
    ext_modules=[
        CppExtension(
            name="torchneuron._C",
            sources=sources,
            include_dirs=[os.path.join(HERE, "csrc")],
            extra_compile_args=["-O2", "-Wno-unused-parameter"],
        )
    ]
    if BUILD_EXT
    else [],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
