"""The default suite's slice of the vision battery (torchneuron/compat/vision): every
torchvision op (forward, backward, bad input), every transforms v2 case and the DataLoader with
workers, and two models, each on neuron against the CPU. torchvision installs beside torch 2.14.1
only (.venv-214): in .venv these tests are skipped, saying so. The whole battery is
`make compat-vision` and the slow test below."""

import pytest
import torch

pytest.importorskip("torchvision")

from torchneuron.compat.staged import NA, PASS, quiet, run_case, select  # noqa: E402
from torchneuron.compat.vision import models, ops, transforms  # noqa: E402
from torchneuron.compat.vision.command import STAGES  # noqa: E402


def _check(cases):
    quiet()
    for case in cases:
        rec = run_case(case, STAGES)
        assert all(rec[s] in (PASS, NA) for s in STAGES), f"{case.name}: {rec['cause']}\n{rec['traceback']}"
        assert all(rec[s] == PASS for s in case.stages), case.name


def test_every_torchvision_op_and_layer_matches_cpu_forward_and_backward():
    _check([c for c in ops.cases() if c.family != "ops:bad input"])


def test_bad_input_to_torchvision_ops_raises_the_cpus_error():
    _check([c for c in ops.cases() if c.family == "ops:bad input"])


def test_transforms_v2_on_neuron_tensors_and_in_a_dataloader_match_cpu():
    _check(transforms.cases())


def test_a_classifier_and_detectors_match_cpu_forward_and_backward():
    # Faster R-CNN's training step samples with torch.randperm (the case draws from the CPU's
    # generator on neuron); the MobileNet FPN detector's random-init scores tied, until the case
    # broke the ties (models._break_score_ties).
    _check(select(models.cases(), ["resnet18", "fasterrcnn_mobilenet_v3_large_320_fpn",
                                   "fasterrcnn_mobilenet_v3_large_fpn"]))


def test_nms_with_boxes_and_scores_on_different_devices_is_refused():
    import torchvision

    boxes = torch.tensor([[0.0, 0.0, 2.0, 2.0], [1.0, 1.0, 3.0, 3.0]])
    scores = torch.tensor([0.9, 0.8])
    with pytest.raises(RuntimeError, match="device"):
        torchvision.ops.nms(boxes.to("neuron"), scores, 0.5)
    with pytest.raises(RuntimeError, match="device"):
        torchvision.ops.roi_align(torch.rand(1, 2, 8, 8, device="neuron"),
                                  torch.tensor([[0.0, 1.0, 1.0, 5.0, 5.0]]), 2)


def test_the_battery_covers_every_builder_and_op_the_issue_lists():
    import torchvision.models as M

    names = {c.name for c in models.cases()}
    for module in (M, M.detection, M.segmentation, M.video, M.optical_flow):
        assert set(M.list_models(module=module)) <= names
    assert len(names) == 109
    op_names = {c.name for c in ops.cases()}
    assert {"ops.nms", "ops.roi_align", "ops.deform_conv2d", "ops.ps_roi_pool",
            "ops.MultiScaleRoIAlign"} <= op_names


@pytest.mark.slow
def test_the_whole_vision_battery_on_neuron(tmp_path):
    from torchneuron.compat.staged import run_battery

    quiet()
    doc = run_battery("vision", models.cases() + ops.cases() + transforms.cases(), STAGES,
                      str(tmp_path))
    failed = [r["name"] + ": " + (r["cause"] or "") for r in doc["records"]
              if any(r[s] not in (PASS, NA) for s in STAGES)]
    assert not failed, "\n".join(failed)
