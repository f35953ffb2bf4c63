"""Every public op of torchvision.ops against the CPU: the functional ops (forward, and backward
where the op has a gradient: the gradient of a fixed weighted sum with respect to each floating
input) and the layers (forward and backward through their parameters); then bad input, which must
raise on neuron what it raises on the CPU (the stage's result is the exception's type and first
line). The random ops (drop_block, stochastic_depth) are run in their deterministic settings
(eval, p=0 and p=1). Mismatched devices exist on neuron only: tests/vision compares them with
what a CPU/meta pair raises."""

from __future__ import annotations

import torch

from ..staged import Case
from .moving import to_device


def _boxes(n: int, g: torch.Generator, size: float = 50.0) -> torch.Tensor:
    xy = torch.rand(n, 2, generator=g) * size
    wh = torch.rand(n, 2, generator=g) * size / 2 + 1
    return torch.cat([xy, xy + wh], 1)


def _rois(n: int, g: torch.Generator, batches: int = 2, size: float = 12.0) -> torch.Tensor:
    index = torch.randint(batches, (n, 1), generator=g).float()
    return torch.cat([index, _boxes(n, g, size)], 1)


def _inputs(name: str) -> tuple[list, dict]:
    """Positional arguments and keywords of each functional case, on the CPU."""
    g = torch.Generator().manual_seed(2)
    feat = torch.rand(2, 8, 16, 16, generator=g)
    if name in ("nms",):
        return [_boxes(20, g), torch.rand(20, generator=g), 0.5], {}
    if name == "batched_nms":
        return [_boxes(20, g), torch.rand(20, generator=g), torch.randint(3, (20,), generator=g), 0.5], {}
    if name in ("box_iou", "generalized_box_iou", "distance_box_iou", "complete_box_iou"):
        return [_boxes(6, g), _boxes(5, g)], {}
    if name in ("generalized_box_iou_loss", "distance_box_iou_loss", "complete_box_iou_loss"):
        return [_boxes(6, g), _boxes(6, g)], {"reduction": "mean"}
    if name == "box_area":
        return [_boxes(6, g)], {}
    if name == "box_convert":
        return [_boxes(6, g)], {"in_fmt": "xyxy", "out_fmt": "cxcywh"}
    if name == "clip_boxes_to_image":
        return [_boxes(6, g, 80.0), (40, 50)], {}
    if name == "remove_small_boxes":
        return [_boxes(12, g), 10.0], {}
    if name == "masks_to_boxes":
        return [(torch.rand(4, 20, 24, generator=g) > 0.7)], {}
    if name == "sigmoid_focal_loss":
        return [torch.randn(6, 4, generator=g), (torch.rand(6, 4, generator=g) > 0.5).float()], {"reduction": "mean"}
    if name in ("roi_align", "ps_roi_align"):
        return [feat, _rois(5, g)], {"output_size": 2, "spatial_scale": 1.0, "sampling_ratio": 2}
    if name in ("roi_pool", "ps_roi_pool"):
        return [feat, _rois(5, g)], {"output_size": 2, "spatial_scale": 1.0}
    if name == "deform_conv2d":
        offset = torch.randn(2, 2 * 9, 14, 14, generator=g)
        weight = torch.randn(4, 8, 3, 3, generator=g)
        mask = torch.rand(2, 9, 14, 14, generator=g)
        return [feat, offset, weight], {"bias": torch.randn(4, generator=g), "mask": mask}
    if name == "drop_block2d":
        return [feat, 0.5, 3], {"training": False}
    if name == "drop_block3d":
        return [torch.rand(2, 4, 4, 6, 6, generator=g), 0.5, 3], {"training": False}
    if name == "stochastic_depth":
        return [feat, 1.0, "row"], {"training": True}  # p=1: every row dropped, no draw matters
    raise KeyError(name)


FUNCTIONAL = ("nms", "batched_nms", "box_iou", "generalized_box_iou", "distance_box_iou",
              "complete_box_iou", "generalized_box_iou_loss", "distance_box_iou_loss",
              "complete_box_iou_loss", "box_area", "box_convert", "clip_boxes_to_image",
              "remove_small_boxes", "masks_to_boxes", "sigmoid_focal_loss", "roi_align",
              "ps_roi_align", "roi_pool", "ps_roi_pool", "deform_conv2d", "drop_block2d",
              "drop_block3d", "stochastic_depth")
# Ops whose result has no gradient (indices, integer or boolean results).
NO_GRAD = {"nms", "batched_nms", "remove_small_boxes", "masks_to_boxes"}


def _weighted_sum(out) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    outs = list(out.values()) if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else [out]
    total = 0
    for o in outs:
        total = total + (o * torch.rand(o.shape, generator=g).to(o.device)).sum()
    return total


def run_functional(name: str, device: str):
    import torchvision.ops as O

    args, kwargs = to_device(_inputs(name), device)
    fn = getattr(O, name)
    with torch.no_grad():
        yield "forward", fn(*args, **kwargs)
    if name in NO_GRAD:
        return
    leaves = [a for a in list(args) + list(kwargs.values())
              if isinstance(a, torch.Tensor) and a.is_floating_point()]
    leaves = [a.detach().requires_grad_() for a in leaves]
    it = iter(leaves)
    args = [next(it) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    kwargs = {k: next(it) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
              for k, v in kwargs.items()}
    _weighted_sum(fn(*args, **kwargs)).backward()
    yield "backward", [a.grad for a in leaves]


def _layer(name: str):
    import torchvision.ops as O

    if name == "DeformConv2d":
        return O.DeformConv2d(8, 4, 3, padding=1), "deform"
    if name == "FeaturePyramidNetwork":
        return O.FeaturePyramidNetwork([4, 8], 6), "fpn"
    if name == "MultiScaleRoIAlign":
        return O.MultiScaleRoIAlign(["a", "b"], 3, 2), "multiscale"
    if name == "FrozenBatchNorm2d":
        bn = O.FrozenBatchNorm2d(8)
        bn.weight.uniform_(0.5, 1.5), bn.running_var.uniform_(0.5, 1.5), bn.running_mean.normal_()
        return bn, "image"
    if name == "SqueezeExcitation":
        return O.SqueezeExcitation(8, 4), "image"
    if name == "Conv2dNormActivation":
        return O.Conv2dNormActivation(8, 4), "image"
    if name == "Conv3dNormActivation":
        return O.Conv3dNormActivation(4, 4), "volume"
    if name == "MLP":
        return O.MLP(8, [16, 4], dropout=0.0), "vector"
    if name == "Permute":
        return O.Permute([0, 2, 3, 1]), "image"
    if name in ("RoIAlign", "PSRoIAlign"):
        return getattr(O, name)(2, 1.0, 2), "roi"
    if name in ("RoIPool", "PSRoIPool"):
        return getattr(O, name)(2, 1.0), "roi"
    raise KeyError(name)


LAYERS = ("DeformConv2d", "FeaturePyramidNetwork", "MultiScaleRoIAlign", "FrozenBatchNorm2d",
          "SqueezeExcitation", "Conv2dNormActivation", "Conv3dNormActivation", "MLP", "Permute",
          "RoIAlign", "PSRoIAlign", "RoIPool", "PSRoIPool")


def _layer_inputs(kind: str, g: torch.Generator):
    from collections import OrderedDict

    feat = torch.rand(2, 8, 16, 16, generator=g)
    if kind == "deform":
        return (feat, torch.randn(2, 18, 16, 16, generator=g))
    if kind == "fpn":
        return (OrderedDict(a=torch.rand(2, 4, 16, 16, generator=g), b=torch.rand(2, 8, 8, 8, generator=g)),)
    if kind == "multiscale":
        feats = OrderedDict(a=torch.rand(2, 4, 16, 16, generator=g), b=torch.rand(2, 4, 8, 8, generator=g))
        return (feats, [_boxes(3, g, 40.0), _boxes(2, g, 40.0)], [(64, 64), (64, 64)])
    if kind == "volume":
        return (torch.rand(2, 4, 4, 6, 6, generator=g),)
    if kind == "vector":
        return (torch.rand(5, 8, generator=g),)
    if kind == "roi":
        return (feat, _rois(5, g))
    return (feat,)


def _requiring_grad(x, leaves: list):
    """`x` with every floating tensor a fresh leaf that requires grad (collected in `leaves`)."""
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        leaf = x.detach().requires_grad_()
        leaves.append(leaf)
        return leaf
    if isinstance(x, (list, tuple)):
        return type(x)(_requiring_grad(v, leaves) for v in x)
    if isinstance(x, dict):
        return type(x)((k, _requiring_grad(v, leaves)) for k, v in x.items())
    return x


def run_layer(name: str, device: str):
    torch.manual_seed(0)
    layer, kind = _layer(name)
    layer = layer.to(device)
    inputs = to_device(_layer_inputs(kind, torch.Generator().manual_seed(4)), device)
    layer.eval()
    with torch.no_grad():
        yield "forward", layer(*inputs)
    params = [p for p in layer.parameters() if p.requires_grad]
    leaves: list = []
    # Boxes and image sizes are not differentiated; features and images are.
    inputs = (_requiring_grad(inputs[0], leaves), *inputs[1:])
    _weighted_sum(layer(*inputs)).backward()
    yield "backward", [p.grad for p in params] + [x.grad for x in leaves]


def _error(fn) -> tuple[str, str]:
    """The exception fn raises, as (type, first line), with device names taken out: the CPU's
    message names cpu where neuron's names neuron."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the exception is the result
        first = (str(e).strip().splitlines() or [""])[0]
        return type(e).__name__, first.replace("neuron:0", "DEV").replace("neuron", "DEV").replace("cpu", "DEV")
    return ("no error", "")


BAD_INPUT = {
    "nms: boxes of shape (N, 3)": lambda d: __import__("torchvision").ops.nms(
        torch.rand(4, 3, device=d), torch.rand(4, device=d), 0.5),
    "nms: scores and boxes of different lengths": lambda d: __import__("torchvision").ops.nms(
        torch.rand(4, 4, device=d), torch.rand(3, device=d), 0.5),
    "nms: boxes and scores of different dtypes": lambda d: __import__("torchvision").ops.nms(
        torch.rand(4, 4, device=d), torch.rand(4, device=d, dtype=torch.float64), 0.5),
    "box_iou: boxes of shape (N, 3)": lambda d: __import__("torchvision").ops.box_iou(
        torch.rand(4, 3, device=d), torch.rand(4, 4, device=d)),
    "roi_align: rois of shape (K, 4)": lambda d: __import__("torchvision").ops.roi_align(
        torch.rand(1, 2, 8, 8, device=d), torch.rand(3, 4, device=d), 2),
    "roi_pool: 3-d input": lambda d: __import__("torchvision").ops.roi_pool(
        torch.rand(2, 8, 8, device=d), torch.zeros(1, 5, device=d), 2),
    "ps_roi_align: channels not divisible by the bins": lambda d: __import__("torchvision").ops.ps_roi_align(
        torch.rand(1, 3, 8, 8, device=d), torch.zeros(1, 5, device=d), 2),
    "deform_conv2d: offset of the wrong shape": lambda d: __import__("torchvision").ops.deform_conv2d(
        torch.rand(1, 2, 8, 8, device=d), torch.rand(1, 5, 6, 6, device=d), torch.rand(3, 2, 3, 3, device=d)),
    "box_convert: unknown format": lambda d: __import__("torchvision").ops.box_convert(
        torch.rand(2, 4, device=d), "xyxy", "abcd"),
    "masks_to_boxes: 2-d masks": lambda d: __import__("torchvision").ops.masks_to_boxes(
        torch.ones(4, 4, device=d)),
}


def run_bad_input(label: str, device: str):
    yield "forward", _error(lambda: BAD_INPUT[label](device))


def cases() -> list[Case]:
    out = [Case(f"ops.{n}", "ops", lambda device, n=n: run_functional(n, device),
                ("forward",) if n in NO_GRAD else ("forward", "backward")) for n in FUNCTIONAL]
    out += [Case(f"ops.{n}", "ops:layer", lambda device, n=n: run_layer(n, device),
                 ("forward", "backward")) for n in LAYERS]
    out += [Case(f"ops bad input: {label}", "ops:bad input",
                 lambda device, label=label: run_bad_input(label, device), ("forward",))
            for label in BAD_INPUT]
    return out
