"""timm's model families (one per module of timm.models), each as its smallest registered
configuration: among the module's names ranked by size words (test_, atto, femto, pico, nano,
tiny, ...), the first few are built on the meta device and the one with the fewest parameters
runs, with random weights (pretrained=False) at its default input size. Stages: "forward" (eval),
"backward" (train mode with dropout and drop-path off: the loss and every gradient), and for a
sample of families "channels_last" (eval forward of the model and input in channels_last) and
"autocast" (eval forward under bf16 autocast, at bf16's tolerances)."""

from __future__ import annotations

import re

import torch

from ...device.random import drawing_from_cpu_generator
from ..staged import Case

SIZE_WORDS = ("test", "atto", "femto", "pico", "nano", "xxs", "tiny", "xs", "mini", "small",
              "lite", "b0", "s", "t", "18")
CANDIDATES = 4  # names built on meta per family to find the smallest
# channels_last and bf16 autocast on a sample: convolutional and attention families alike.
SAMPLE = ("resnet", "convnext", "efficientnet", "mobilenetv3", "regnet", "densenet",
          "vision_transformer", "swin_transformer", "deit", "beit", "maxxvit", "byobnet",
          "cspnet", "ghostnet", "levit", "vgg")
# bf16 keeps 8 bits of mantissa: a forward through a deep random network differs from the
# CPU's bf16 autocast by rounding order; the stage compares at these tolerances.
AUTOCAST_TOLERANCE = (5e-2, 5e-2)


def _rank(name: str) -> tuple:
    words = re.split(r"[_.]", name)
    for i, w in enumerate(SIZE_WORDS):
        if w in words or (i < 2 and name.startswith(w)):
            return (i, len(name), name)
    return (len(SIZE_WORDS), len(name), name)


def _quiet_import():
    import timm

    return timm


def smallest(module: str) -> str | None:
    """The family's smallest configuration (fewest parameters among the best-ranked names)."""
    timm = _quiet_import()
    names = sorted(timm.list_models(module=module), key=_rank)[:CANDIDATES]
    best = None
    for name in names:
        try:
            with torch.device("meta"):
                model = timm.create_model(name, pretrained=False)
        except Exception:  # noqa: BLE001 - a name that does not build on meta is skipped here
            continue
        count = sum(p.numel() for p in model.parameters())
        if best is None or count < best[0]:
            best = (count, name)
    return best[1] if best else (names[0] if names else None)


def _no_randomness(model: torch.nn.Module) -> None:
    model.train()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout) or type(m).__name__ in ("DropPath", "DropBlock2d"):
            m.eval()


def run(name: str, sample: bool, device: str):
    timm = _quiet_import()
    model = timm.create_model(name, pretrained=False)
    size = model.pretrained_cfg.get("input_size", (3, 224, 224))
    x = torch.rand(2, *size, generator=torch.Generator().manual_seed(6))
    model = model.to(device)  # the neuron side's first device use reads NEURON_RNG: set below
    x = x.to(device)
    # Classifier heads drop out through F.dropout (ghostnet, repghost, legacy SENet: drop_rate
    # 0.2), which _no_randomness cannot switch off: on neuron the case draws from the CPU's
    # generator, whose state both sides reach alike (the same seed, the same init), so both
    # drop the same units.
    try:
        with drawing_from_cpu_generator():
            yield from _stages(model, x, sample, device)
    finally:
        # As the torchvision battery does (vision/models.py): the device keeps freed blocks
        # cached, and 98 families' worth grew the first full run to 19.6 GB (the OOM killer
        # stopped it at family 14).
        del model, x
        if device == "neuron":
            torch.neuron.empty_cache()


def _stages(model: torch.nn.Module, x: torch.Tensor, sample: bool, device: str):
    model.eval()
    with torch.no_grad():
        yield "forward", model(x)
    _no_randomness(model)
    out = model(x)
    loss = (out if isinstance(out, torch.Tensor) else out[0]).float().pow(2).mean()
    loss.backward()
    yield "backward", [("loss", loss.detach())] + [
        (n, p.grad) for n, p in model.named_parameters() if p.grad is not None]
    if not sample:
        return
    model.eval()
    with torch.no_grad():
        yield "channels_last", model.to(memory_format=torch.channels_last)(
            x.contiguous(memory_format=torch.channels_last))
        with torch.autocast(device, dtype=torch.bfloat16):
            yield "autocast", model(x)


STAGES = ("forward", "backward", "channels_last", "autocast")


def cases() -> list[Case]:
    timm = _quiet_import()
    out = []
    for module in timm.list_modules():
        name = smallest(module)
        if name is None:
            continue
        sample = module in SAMPLE
        stages = STAGES if sample else STAGES[:2]
        out.append(Case(f"{module}: {name}", f"timm:{module}",
                        lambda device, name=name, sample=sample: run(name, sample, device), stages,
                        tolerances={"autocast": AUTOCAST_TOLERANCE}))
    return out
