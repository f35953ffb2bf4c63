# Builds torchneuron._C against the torch that is already installed (no build isolation):
# the extension must match that torch's ABI exactly, so each torch version gets its own build,
# side by side in torchneuron/_builds/torch-<version>/ (torchneuron/runtime/extension.py picks one).
import glob
import importlib.util
import os

from setuptools import setup

# Building imports torch, and torch imports every installed `torch.backends` entry point, this
# package included, whose _C is what is being built: keep torch from loading it here.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _extension_module():
    """torchneuron/runtime/extension.py by its path (importing the package would load _C)."""
    path = os.path.join(HERE, "torchneuron", "runtime", "extension.py")
    spec = importlib.util.spec_from_file_location("_torchneuron_extension", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


import torch  # noqa: E402

EXTENSION = _extension_module()
TORCH_VERSION = str(torch.__version__)


class BuildPerTorchVersion(BuildExtension.with_options(use_ninja=True)):
    """Writes _C into the folder of the installed torch's version, and keeps ninja's objects per
    version too, so building for 2.14 leaves the 2.13 build (and its incremental state) alone."""

    def finalize_options(self):
        super().finalize_options()
        self.build_temp = os.path.join(HERE, "build", f"torch-{TORCH_VERSION}")

    def _get_inplace_equivalent(self, build_py, ext):
        # setuptools builds into build_lib (get_ext_fullpath below) and then copies to the source
        # tree: both ends in the version's folder.
        if ext.name != "torchneuron._C":
            return super()._get_inplace_equivalent(build_py, ext)
        folder = EXTENSION.build_dir(TORCH_VERSION)
        name = self.get_ext_filename("_C")
        regular = os.path.join(self.build_lib, os.path.relpath(folder, HERE), name)
        os.makedirs(folder, exist_ok=True)
        return os.path.join(str(folder), name), regular

    def get_ext_fullpath(self, ext_name):
        if ext_name != "torchneuron._C":
            return super().get_ext_fullpath(ext_name)
        folder = EXTENSION.build_dir(TORCH_VERSION)
        if not self.inplace:  # a wheel: the same layout under build_lib
            folder = os.path.join(self.build_lib, os.path.relpath(folder, HERE))
        return os.path.join(str(folder), self.get_ext_filename("_C"))

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
    cmdclass={"build_ext": BuildPerTorchVersion},
)
