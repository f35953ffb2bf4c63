"""torchvision.transforms.v2 on neuron tensors (images, boxes, masks as tv_tensors), each
transform against the CPU; random transforms draw their parameters from the default CPU
generator, which the staged runner seeds the same for both devices. Then a DataLoader with 2
worker processes applying a v2 pipeline to CPU samples, whose batches move to the device and go
through a device-side v2 normalization."""

from __future__ import annotations

import torch

from ..staged import Case


def _transforms():
    from torchvision.transforms import v2

    return {
        "Resize": v2.Resize((24, 20), antialias=True),
        "CenterCrop": v2.CenterCrop(16),
        "RandomResizedCrop": v2.RandomResizedCrop(16, antialias=True),
        "RandomHorizontalFlip": v2.RandomHorizontalFlip(p=1.0),
        "RandomRotation": v2.RandomRotation(30),
        "RandomAffine": v2.RandomAffine(20, translate=(0.1, 0.1), scale=(0.8, 1.2)),
        "Pad": v2.Pad(3, fill=7),
        "ColorJitter": v2.ColorJitter(0.3, 0.3, 0.3, 0.1),
        "Grayscale": v2.Grayscale(3),
        "GaussianBlur": v2.GaussianBlur(5, sigma=1.0),
        "Normalize": v2.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3]),
        "ToDtype": v2.ToDtype(torch.float32, scale=True),
        "Compose": v2.Compose([v2.RandomResizedCrop(20, antialias=True), v2.RandomHorizontalFlip(),
                               v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5] * 3, [0.25] * 3)]),
    }


def _sample(device: str, uint8: bool):
    from torchvision import tv_tensors

    g = torch.Generator().manual_seed(5)
    image = torch.randint(0, 256, (3, 32, 28), generator=g, dtype=torch.uint8)
    if not uint8:
        image = image.float() / 255
    boxes = tv_tensors.BoundingBoxes(torch.tensor([[2.0, 3.0, 18.0, 20.0], [5.0, 1.0, 12.0, 30.0]]),
                                     format="XYXY", canvas_size=(32, 28))
    mask = tv_tensors.Mask((torch.rand(32, 28, generator=g) > 0.5).to(torch.uint8))
    return (tv_tensors.Image(image).to(device), boxes.to(device), mask.to(device))


def run_transform(name: str, device: str):
    transform = _transforms()[name]
    # Photometric and dtype transforms take the image alone; geometric ones move boxes and masks.
    photometric = name in ("ColorJitter", "Grayscale", "GaussianBlur", "Normalize", "ToDtype")
    uint8 = name in ("ToDtype", "Compose", "ColorJitter", "Grayscale")
    sample = _sample(device, uint8)
    out = transform(sample[0]) if photometric else transform(*sample)
    yield "forward", [torch.Tensor(x).as_subclass(torch.Tensor) for x in (out if isinstance(out, tuple) else (out,))]


class _Images(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        from torchvision import tv_tensors
        from torchvision.transforms import v2

        g = torch.Generator().manual_seed(100 + i)
        image = tv_tensors.Image(torch.randint(0, 256, (3, 30, 26), generator=g, dtype=torch.uint8))
        pipeline = v2.Compose([v2.CenterCrop(24), v2.Resize(16, antialias=True),
                               v2.ToDtype(torch.float32, scale=True)])
        return pipeline(image).as_subclass(torch.Tensor), i


def run_dataloader(device: str):
    from torchvision.transforms import v2

    loader = torch.utils.data.DataLoader(_Images(), batch_size=4, num_workers=2)
    normalize = v2.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])
    batches = [(normalize(images.to(device)), labels.to(device)) for images, labels in loader]
    yield "forward", batches


# torchvision resizes uint8 images with a uint8 kernel only when they are on the CPU
# (v2.functional._geometry: `image.device.type == "cpu"`); on any other device, CUDA included,
# it interpolates in float32 and rounds back, which can differ by one level of 255. Compose
# resizes a uint8 image, then scales by 1/255 and normalizes by std 0.25: one level is 4/255.
UINT8_RESIZE_TOLERANCE = {"forward": (4 / 255 + 1e-6, 0.0)}


def cases() -> list[Case]:
    out = [Case(f"transforms.v2.{n}", "transforms", lambda device, n=n: run_transform(n, device),
                ("forward",), tolerances=UINT8_RESIZE_TOLERANCE if n == "Compose" else {})
           for n in _transforms()]
    out.append(Case("transforms.v2 in a DataLoader (2 workers)", "transforms",
                    run_dataloader, ("forward",)))
    return out
