"""One architecture through the battery's stages, on the CPU and on neuron with identical
weights and inputs: build, forward (outputs compared), one training step (loss and every
gradient compared) and, for generative heads, greedy generate() (token ids must be equal).

A stage that fails on the CPU is "cpu_fail": the architecture does not run there with the
battery's tiny config, so it says nothing about neuron and is counted apart."""

from __future__ import annotations

import contextlib
import copy
import random
import time
import traceback
from typing import Any, Callable

import torch

from ..judge import Mismatch, compare_leaves
from ..random_draws import RandomDraws
from .catalog import Architecture
from .input_basics import names_no_image_size
from .inputs import EVERY_DOCUMENTED, INPUT_SETS, forward_inputs, labels
from .main_input import AUDIO_INPUTS, LAYOUTS, main_input, processor_image_size

MAX_PARAMETERS = 40_000_000  # above this a shrink rule missed a size; fixed-size parts (SAM2's Hiera) stay below
# Larger processor sizes (960 x 960 detectors, 1536 x 1536 depth models) make the CPU probe of
# every shrink profile outlast the per-architecture time limit: such models stay untried.
MAX_PROCESSOR_SIDE = 512
NEW_TOKENS = 8
SEED = 0

PASS, FAIL, CPU_FAIL, NA = "pass", "fail", "cpu_fail", "n/a"
STAGES = ("build", "forward", "backward", "generate")


def _seed_everything() -> None:
    random.seed(SEED)
    torch.manual_seed(SEED)  # seeds neuron's generators too
    try:
        import numpy as np

        np.random.seed(SEED)
    except ImportError:
        pass


def _to(obj, device: str):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    return obj


def tensors(obj, prefix: str = "out") -> list[tuple[str, torch.Tensor]]:
    """Every tensor in a model output (ModelOutput, tuples, dicts), by path; caches skipped."""
    if isinstance(obj, torch.Tensor):
        return [(prefix, obj)]
    if isinstance(obj, dict):  # ModelOutput is an OrderedDict
        return [t for k, v in obj.items() for t in tensors(v, f"{prefix}.{k}")]
    if isinstance(obj, (list, tuple)):
        return [t for i, v in enumerate(obj) for t in tensors(v, f"{prefix}[{i}]")]
    return []


def compare(cpu: list[tuple[str, torch.Tensor]], dev: list[tuple[str, torch.Tensor]],
            what: str) -> float:
    """The judge on every (name, tensor) pair, at assert_close's default tolerances; returns
    the largest absolute difference seen. A Mismatch names the stage (`what`)."""
    try:
        return compare_leaves(dev, cpu, measure=True)
    except Mismatch as m:
        worst = f" (max abs {m.max_error:.3g})" if m.max_error is not None else ""
        raise Mismatch(f"{what}: {m}{worst}", m.max_error) from None


def generic_loss(out) -> torch.Tensor:
    """For heads without labels: every floating output contributes, so every parameter the
    forward used gets a gradient."""
    parts = [t.float().pow(2).mean() for _, t in tensors(out) if t.is_floating_point() and t.requires_grad]
    if not parts:
        raise RuntimeError("the forward returned no floating tensor that requires grad")
    return torch.stack(parts).sum()


def _cause(e: BaseException) -> str:
    # Validation errors wrap the useful message: report the innermost cause.
    while e.__cause__ is not None:
        e = e.__cause__
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]


def _is_float64_refusal(e: BaseException) -> bool:
    return "NEURON_FLOAT64" in str(e)


class Run:
    """The state of one architecture's check, written into its report record."""

    def __init__(self, arch: Architecture):
        self.arch = arch
        self.record: dict[str, Any] = {
            "model_type": arch.model_type, "class": arch.class_name, "family": arch.family,
            "head": arch.head, "parameters": None, "float64_allowed": False,
            **{s: NA for s in STAGES}, "max_abs_error": {}, "seconds": {"cpu": 0.0, "neuron": 0.0},
            "cause": None, "traceback": None, "random_draws": {},
        }
        self.draws = RandomDraws()  # the current stage's draws, taken from the CPU run

    def timed(self, device: str, fn: Callable[[], Any]) -> Any:
        t = time.perf_counter()
        try:
            return fn()
        finally:
            self.record["seconds"][device] += time.perf_counter() - t

    def on_neuron(self, fn: Callable[[], Any]) -> Any:
        """Runs a neuron stage and notes whether it computed in float64 (a host fallback under
        the default NEURON_FLOAT64=warn, counted per op); under NEURON_FLOAT64=error a float64
        refusal is retried under `allow` and noted the same way, the battery's documented choice
        (the model computes in float64 on purpose)."""
        from torchneuron.ops import dtype_policy

        before = sum(dtype_policy.host_fallback_counts().values())
        try:
            with self.draws.replaying():
                result = self.timed("neuron", fn)
        except Exception as e:  # noqa: BLE001 - any error becomes the stage's cause
            if not _is_float64_refusal(e):
                raise
        else:
            if sum(dtype_policy.host_fallback_counts().values()) > before:
                self.record["float64_allowed"] = True
            return result
        self.record["float64_allowed"] = True
        with dtype_policy.float64_policy("allow"), self.draws.replaying():
            return self.timed("neuron", fn)

    def _first_cause(self, cause: str) -> None:
        # The first failing stage explains the architecture; later ones often follow from it.
        if self.record["cause"] is None:
            self.record["cause"] = cause
            self.record["traceback"] = traceback.format_exc(limit=-6)

    def stage(self, name: str, cpu: Callable[[], Any], neuron: Callable[[Any], Any],
              draws_are_inputs: bool = True) -> bool:
        """CPU part first (its failure is cpu_fail), then neuron part with the CPU's result.
        Where `draws_are_inputs`, the model's random draws in the CPU part are given to the
        neuron part (random_draws.py); building draws weights on the CPU only."""
        self.draws = RandomDraws()
        try:
            _seed_everything()
            with self.draws.recording() if draws_are_inputs else contextlib.nullcontext():
                expected = self.timed("cpu", cpu)
            if len(self.draws):
                self.record["random_draws"][name] = len(self.draws)
        except Exception as e:  # noqa: BLE001
            self.record[name] = CPU_FAIL
            self._first_cause(f"cpu {name}: {_cause(e)}")
            return False
        try:
            _seed_everything()
            neuron(expected)
        except Exception as e:  # noqa: BLE001
            self.record[name] = FAIL
            self._first_cause(f"neuron {name}: {_cause(e)}")
            return False
        self.record[name] = PASS
        return True


def _config_for(cls, config):
    """The config the head class is written for (its `config_class`): a multimodal type whose
    auto mapping pairs its composite config with a text-only head (Llama4ForCausalLM takes
    Llama4TextConfig) hands the head the sub-config of that class, as checkpoints do."""
    wanted = getattr(cls, "config_class", None)
    if not isinstance(wanted, type) or isinstance(config, wanted):
        return config
    for name in getattr(config, "sub_configs", None) or {}:
        sub = getattr(config, name, None)
        if isinstance(sub, wanted):
            return sub
    return config


def _meta_parameters(cls, config) -> int:
    """The model's parameter count, built on the meta device; a length the model requires and
    the config leaves unset (config_repairs.give_required_length), a timm model name it requires
    and the config leaves unset (timm_models.give_unset_timm_name), a timm argument it reads that
    the tower's model_args leave out (timm_models.give_read_model_arg), and a setting the model reads
    that its config class lacks (missing_settings.py), are given first."""
    from .missing_settings import MAX_REPAIRS, give_missing_setting
    from .config_repairs import give_required_length
    from .timm_models import give_read_model_arg, give_unset_timm_name

    repairs = 0
    while True:
        try:
            with torch.device("meta"):
                return sum(p.numel() for p in cls(config).parameters())
        except ValueError as e:
            if not (give_required_length(config, e) or give_unset_timm_name(config, e)):
                raise
        except AttributeError as e:
            repairs += 1
            if repairs > MAX_REPAIRS or not give_missing_setting(config, e):
                raise
        except KeyError as e:
            repairs += 1
            if repairs > MAX_REPAIRS or not give_read_model_arg(config, e):
                raise


def _build(arch: Architecture, profile: str):
    import transformers

    from .tiny_config import tiny_config

    config = tiny_config(arch.model_type, profile)
    if arch.head == "causal_lm" and hasattr(config, "is_decoder") and not config.is_encoder_decoder:
        config.is_decoder = True  # encoder models used as LM heads (BertLMHeadModel) need it
    cls = getattr(transformers, arch.class_name)
    config = _config_for(cls, config)
    n = _meta_parameters(cls, config)
    if n > MAX_PARAMETERS:
        raise RuntimeError(f"tiny config still has {n / 1e6:.0f}M parameters")
    _seed_everything()
    model = cls(config).eval()
    gen_config = getattr(model, "generation_config", None)
    if config.is_encoder_decoder and gen_config is not None and gen_config.decoder_start_token_id is None:
        # Checkpoints ship this in generation_config.json; a model built from a config has none.
        gen_config.decoder_start_token_id = next(
            (i for i in (getattr(config, "pad_token_id", None), getattr(config, "bos_token_id", None))
             if isinstance(i, int)), 0)
    return model, n


def _layouts(model, arch: Architecture) -> tuple[str, ...]:
    """The input layouts worth trying: the documented one, and the others only where the model
    takes audio, token ids over several codebooks, images or patches on a grid."""
    try:  # every input the battery may give, the documented ones included (CLVP's features)
        inputs = forward_inputs(model, arch.head, torch.Generator().manual_seed(SEED),
                                EVERY_DOCUMENTED)
    except Exception:  # noqa: BLE001 - no recipe: nothing to lay out either
        return LAYOUTS[:1]
    layouts = [LAYOUTS[0]]
    if any(name in inputs for name in AUDIO_INPUTS):
        layouts.append("audio transposed")
    if "input_ids" in inputs and isinstance(getattr(model.config, "num_codebooks", None), int):
        layouts.append("ids per codebook")
    size = processor_image_size(model.config.model_type)
    if "pixel_values" in inputs and names_no_image_size(model.config) and size \
            and max(size) <= MAX_PROCESSOR_SIDE:
        layouts.append("processor image size")
    if "pixel_values" in inputs and inputs["pixel_values"].dim() == 4:
        layouts.append("images per sample")
    if "grid_thw" in inputs:
        layouts.append("patches as images")
    return tuple(layouts)


def _runs_on_cpu(model, arch: Architecture, every_modality: int, layout: str) -> bool:
    """Whether a copy of `model` runs forward on these inputs. A setting forward reads that the
    config class lacks (missing_settings.py) is given on `model`'s own config, and tried again;
    so is an input width its first projection names (input_widths.py), recorded on `model`.
    The probe runs a copy: a model that caches derived tensors in plain attributes at its first
    forward (Mimi's codebook) would keep them on the CPU through .to()."""
    from .input_widths import ATTRIBUTE, input_widths

    widths = input_widths(model)
    if _probe(model, arch, every_modality, layout):
        return True
    setattr(model, ATTRIBUTE, widths)  # widths fitted to inputs that still fail are not kept
    return False


def _probe(model, arch: Architecture, every_modality: int, layout: str) -> bool:
    from .input_widths import fit_input_width
    from .missing_settings import MAX_REPAIRS, give_missing_setting

    for _ in range(MAX_REPAIRS + 1):
        probe = copy.deepcopy(model)
        inputs: dict[str, torch.Tensor] = {}
        try:
            inputs = forward_inputs(probe, arch.head, torch.Generator().manual_seed(SEED),
                                    every_modality, layout)
            with torch.no_grad():
                probe(**inputs)
            return True
        except AttributeError as e:
            if not give_missing_setting(model.config, e):
                return False
        except (RuntimeError, ValueError) as e:  # an input of another width than the model takes
            if not fit_input_width(model, inputs, e):
                return False
        except Exception:  # noqa: BLE001 - this shrink profile does not fit the model: try the next
            return False
    return False


def build_tiny(arch: Architecture):
    """(model, parameters, profile, every_modality, layout): the first shrink profile, input
    set (inputs.INPUT_SETS: the main input alone, then one input per declared modality, then
    every documented input; `every_modality` is its index) and, for audio, input
    layout (inputs.LAYOUTS), whose model builds and runs forward on the CPU; else the first model
    that builds (its forward then fails as the report's cause), else the first profile's build
    error."""
    from .shrink import PROFILES

    fallback = None
    for profile in PROFILES:
        try:
            model, n = _build(arch, profile)
        except Exception:  # noqa: BLE001 - the next profile may build
            continue
        for layout in _layouts(model, arch):
            for every_modality in range(len(INPUT_SETS)):
                if _runs_on_cpu(model, arch, every_modality, layout):
                    return model, n, profile, every_modality, layout
        fallback = fallback or (model, n, profile, False, LAYOUTS[0])
    if fallback is not None:
        return fallback
    # raises the first profile's error
    return (*_build(arch, PROFILES[0]), PROFILES[0], False, LAYOUTS[0])


def check(arch: Architecture) -> dict[str, Any]:
    """The report record of one architecture; never raises for a model's failure."""
    run = Run(arch)
    rec = run.record
    models: dict[str, Any] = {}

    def build_cpu():
        models["cpu"], rec["parameters"], rec["shrink_profile"], rec["every_modality"], \
            rec["input_layout"] = build_tiny(arch)

    def build_neuron(_):
        models["neuron"] = run.on_neuron(lambda: copy.deepcopy(models["cpu"]).to("neuron"))

    if not run.stage("build", build_cpu, build_neuron, draws_are_inputs=False):
        return rec
    cpu_model, dev_model = models["cpu"], models["neuron"]
    gen = torch.Generator().manual_seed(SEED)
    inputs: dict[str, torch.Tensor] = {}

    def forward_cpu():
        inputs.update(forward_inputs(cpu_model, arch.head, gen, rec["every_modality"],
                                     rec["input_layout"]))
        with torch.no_grad():
            return tensors(cpu_model(**inputs))

    def forward_neuron(expected):
        with torch.no_grad():
            got = tensors(run.on_neuron(lambda: dev_model(**_to(inputs, "neuron"))))
        rec["max_abs_error"]["forward"] = compare(expected, got, "forward")

    if not run.stage("forward", forward_cpu, forward_neuron):
        return rec

    train_inputs = dict(inputs)
    y = labels(cpu_model, arch.head, train_inputs, torch.Generator().manual_seed(SEED + 1))
    if y is not None:
        train_inputs["labels"] = y

    def train_step(model, device):
        model.train()
        model.zero_grad(set_to_none=True)
        out = model(**_to(train_inputs, device))
        loss = out.loss if getattr(out, "loss", None) is not None else generic_loss(out)
        loss.backward()
        grads = [(n, p.grad) for n, p in model.named_parameters() if p.grad is not None]
        model.eval()
        return [("loss", loss.detach())] + grads

    def backward_cpu():
        try:
            return train_step(cpu_model, "cpu")
        except Exception:  # noqa: BLE001 - the head's own labels may not fit: generic loss
            if "labels" not in train_inputs:
                raise
            del train_inputs["labels"]
            run.draws.discard()  # the failed attempt's draws are not the neuron run's
            return train_step(cpu_model, "cpu")

    def backward_neuron(expected):
        got = run.on_neuron(lambda: train_step(dev_model, "neuron"))
        rec["max_abs_error"]["backward"] = compare(expected, got, "backward")

    run.stage("backward", backward_cpu, backward_neuron)

    if not (hasattr(cpu_model, "can_generate") and cpu_model.can_generate()):
        return rec
    gen_inputs: dict[str, torch.Tensor] = {}

    def generate(model, device):
        with torch.no_grad():
            return model.generate(**_to(gen_inputs, device), max_new_tokens=NEW_TOKENS,
                                  do_sample=False, num_beams=1)

    def generate_cpu():
        gen_inputs.update(main_input(cpu_model, torch.Generator().manual_seed(SEED + 2),
                                     layout=rec["input_layout"]))
        if not rec["every_modality"]:
            return generate(cpu_model, "cpu")
        # A model whose forward needed every modality (InstructBLIP's Q-Former text beside the
        # image) gets them in generate too; where that does not run, the main input alone.
        main_only = dict(gen_inputs)
        gen_inputs.update({k: v for k, v in forward_inputs(
            cpu_model, arch.head, torch.Generator().manual_seed(SEED + 2), rec["every_modality"],
            rec["input_layout"]).items() if k != "decoder_input_ids"})
        try:
            return generate(cpu_model, "cpu")
        except Exception:  # noqa: BLE001
            gen_inputs.clear()
            gen_inputs.update(main_only)
            run.draws.discard()  # the failed attempt's draws are not the neuron run's
            return generate(cpu_model, "cpu")

    def generate_neuron(expected):
        got = run.on_neuron(lambda: generate(dev_model, "neuron"))
        got, expected = getattr(got, "sequences", got), getattr(expected, "sequences", expected)
        if not isinstance(expected, torch.Tensor):
            # Speech generators return a list of waveforms: every tensor in it, as forward's
            # outputs are compared (token ids within them must be equal: integers are exact).
            rec["max_abs_error"]["generate"] = compare(tensors(expected), tensors(got), "generate")
            return
        if not torch.equal(got.cpu(), expected):
            raise Mismatch(f"generate: neuron ids {got.tolist()} != CPU ids {expected.tolist()}")

    run.stage("generate", generate_cpu, generate_neuron)
    return rec
