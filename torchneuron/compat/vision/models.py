"""Every model builder of torchvision.models' classification, detection, segmentation, video and
optical-flow modules, built with random weights (weights=None: nothing is downloaded), as staged
cases: "forward" (eval mode, no grad) and, for a training sample, "backward" (train mode with
dropout and stochastic depth off, so both devices run the same function: the loss and every
parameter's gradient). Inputs are small so a builder costs seconds; a builder whose architecture
fixes its input size gets that size (INPUT_SIZE)."""

from __future__ import annotations

import torch

from ...device.random import drawing_from_cpu_generator
from ..staged import Case, seed_everything
from .moving import to_device

# Modules whose names list_models uses for each task (quantization is left out: its models
# run on the CPU's quantized engines only, on any device PyTorch ships).
TASKS = ("classification", "detection", "segmentation", "video", "optical_flow")

# Sizes an architecture requires (an image side the CPU accepts); 64 elsewhere.
INPUT_SIZE = {"inception_v3": 128, "maxvit_t": 224, "vit_h_14": 56}
# Keyword arguments that shrink what would be a 224-pixel model to the battery's input.
BUILDER_KWARGS = {"vit_b_16": {"image_size": 64}, "vit_b_32": {"image_size": 64},
                  "vit_l_16": {"image_size": 64}, "vit_l_32": {"image_size": 64},
                  "vit_h_14": {"image_size": 56}}
DETECTION_SIZE = 128
# Training-mode samples: one or more builders of each architecture family, small enough for
# backward on two devices within seconds.
BACKWARD = {
    "alexnet", "convnext_tiny", "densenet121", "efficientnet_b0", "efficientnet_v2_s", "googlenet",
    "inception_v3", "maxvit_t", "mnasnet0_5", "mobilenet_v2", "mobilenet_v3_small", "regnet_x_400mf",
    "regnet_y_400mf", "resnet18", "resnet50", "resnext50_32x4d", "shufflenet_v2_x0_5",
    "squeezenet1_1", "swin_t", "swin_v2_t", "vgg11_bn", "vit_b_32", "wide_resnet50_2",
    "fasterrcnn_mobilenet_v3_large_320_fpn", "fasterrcnn_resnet50_fpn", "retinanet_resnet50_fpn",
    "fcos_resnet50_fpn", "maskrcnn_resnet50_fpn", "keypointrcnn_resnet50_fpn", "ssdlite320_mobilenet_v3_large",
    "deeplabv3_mobilenet_v3_large", "fcn_resnet50", "lraspp_mobilenet_v3_large",
    "r3d_18", "s3d", "raft_small",
}


def builders() -> list[tuple[str, str]]:
    """(task, builder name) of every model the battery runs."""
    import torchvision.models as M

    modules = {"classification": M, "detection": M.detection, "segmentation": M.segmentation,
               "video": M.video, "optical_flow": M.optical_flow}
    return [(task, name) for task in TASKS for name in M.list_models(module=modules[task])]


def _no_randomness(model: torch.nn.Module) -> None:
    """Train mode for batch norm's statistics, eval mode for what draws random numbers."""
    from torchvision.ops import StochasticDepth

    model.train()
    for m in model.modules():
        if isinstance(m, (torch.nn.Dropout, torch.nn.Dropout2d, torch.nn.Dropout3d,
                          StochasticDepth)):
            m.eval()


def _inputs(task: str, name: str):
    g = torch.Generator().manual_seed(1)
    if task == "detection":
        images = [torch.rand(3, DETECTION_SIZE, DETECTION_SIZE, generator=g) for _ in range(2)]
        targets = []
        for _ in range(2):
            xy = torch.rand(3, 2, generator=g) * 60
            wh = torch.rand(3, 2, generator=g) * 40 + 20
            target = {"boxes": torch.cat([xy, xy + wh], 1), "labels": torch.tensor([1, 2, 3])}
            if name.startswith("maskrcnn"):
                target["masks"] = (torch.rand(3, DETECTION_SIZE, DETECTION_SIZE, generator=g) > 0.5).to(torch.uint8)
            if name.startswith("keypointrcnn"):
                kp = torch.rand(3, 17, 2, generator=g) * 60 + 20
                target["keypoints"] = torch.cat([kp, torch.ones(3, 17, 1)], 2)
            targets.append(target)
        return images, targets
    if task == "video":
        # MViT's position embeddings and S3D's last pooling fix 16 frames of 224 pixels.
        fixed = name.startswith(("mvit", "s3d"))
        side, frames, batch = (224, 16, 1) if fixed else (64, 8, 2)
        return torch.rand(batch, 3, frames, side, side, generator=g), None
    if task == "optical_flow":
        # RAFT's correlation pyramid needs feature maps (1/8 of the image) of 16 and more.
        return (torch.rand(1, 3, 128, 128, generator=g), torch.rand(1, 3, 128, 128, generator=g)), None
    side = INPUT_SIZE.get(name, 64)
    return torch.rand(2, 3, side, side, generator=g), None


def _build(task: str, name: str):
    import torchvision.models as M

    kwargs = dict(BUILDER_KWARGS.get(name, {}))
    if task in ("detection", "segmentation"):
        kwargs.update(weights_backbone=None)  # else the backbone's ImageNet weights download
    if task == "detection" and not name.startswith("ssd"):  # SSD resizes to its fixed 300/320
        kwargs.update(min_size=DETECTION_SIZE, max_size=DETECTION_SIZE)
        if name.startswith("keypointrcnn"):
            kwargs.update(num_classes=4)
        else:
            kwargs.update(num_classes=5)
    if task == "classification" and name in ("inception_v3", "googlenet"):
        # Their builders warn without init_weights; the auxiliary heads of training mode need
        # 299-pixel images, so the training sample runs the main path.
        kwargs.update(init_weights=True, aux_logits=False)
    model = M.get_model(name, weights=None, **kwargs)
    if task == "detection":
        _break_score_ties(model)
    return model


def _break_score_ties(model: torch.nn.Module) -> None:
    """Random-init detectors score many boxes exactly alike (fasterrcnn_mobilenet_v3_large_fpn:
    46 of its 100 detections tie at the top score), and then which boxes survive topk and NMS
    depends on how each device's sort orders equal keys, which PyTorch leaves open (CUDA's and
    the CPU's differ too). Seeded noise on every parameter makes the scores distinct, so both
    devices must keep the same boxes."""
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.01)


# The CPU run's freshly built model, copied for the neuron run: random initialization of the
# large builders takes longer than their forward passes, and a copy has the same weights.
_FRESH: dict[str, torch.nn.Module] = {}


def _fresh_model(task: str, name: str) -> torch.nn.Module:
    import copy

    if name in _FRESH:
        return _FRESH.pop(name)
    model = _build(task, name)
    _FRESH[name] = copy.deepcopy(model)
    return model


def _call(task: str, model, x, targets):
    if task == "optical_flow":
        return model(*x, num_flow_updates=2)
    if task == "detection":
        return model(x, targets) if model.training else model(x)
    return model(x)


def _scalar_loss(task: str, out) -> torch.Tensor:
    if task == "detection":
        return sum(out.values())
    if task == "segmentation":
        return sum(v.float().pow(2).mean() for v in out.values())
    if task == "optical_flow":
        return sum(f.pow(2).mean() for f in out)
    if isinstance(out, tuple):  # inception's and googlenet's auxiliary heads in train mode
        return sum(o.pow(2).mean() for o in out)
    return out.pow(2).mean()


def run(task: str, name: str, device: str):
    model = _fresh_model(task, name).to(device)  # the neuron side's first device use
    # The CPU's side built the model (random init draws from the generator) and the neuron side
    # copies it (no draws): seeded again here, both sides' own draws start from the same state.
    # The detectors' training samples draw anchors and proposals with torch.randperm, so neuron's
    # random ops draw from the CPU's generator during the case (NEURON_RNG=cpu's setting).
    seed_everything()
    try:
        with drawing_from_cpu_generator():
            x, targets = to_device(_inputs(task, name), device)
            model.eval()
            with torch.no_grad():
                yield "forward", _call(task, model, x, targets)
            if name in BACKWARD:
                _no_randomness(model)
                out = _call(task, model, x, targets)
                loss = _scalar_loss(task, out)
                loss.backward()
                yield "backward", [("loss", loss.detach())] + [
                    (n, p.grad) for n, p in model.named_parameters() if p.grad is not None]
    finally:
        # Runs when the runner drops the generator. The device keeps freed blocks cached, as
        # CUDA's allocator does: 109 builders' worth grew one battery process to 17.5 GB (the
        # OOM killer stopped it at case 85).
        del model
        if device == "neuron":
            torch.neuron.empty_cache()


def cases() -> list[Case]:
    def case(task: str, name: str) -> Case:
        stages = ("forward", "backward") if name in BACKWARD else ("forward",)
        return Case(name, f"model:{task}", lambda device: run(task, name, device), stages)

    return [case(task, name) for task, name in builders()]
