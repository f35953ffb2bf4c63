"""DDP's runtime statistics on neuron (csrc/distributed/ReducerTimer.cpp): PyTorch's Reducer
asks for a timer of the module's device type; without one it warned on every rank that "time
stats are currently only collected for CPU and CUDA devices" and logged no times. Now a neuron
module logs the same times a CPU module does."""

import warnings

import torch

TIME_KEYS = ("avg_forward_compute_time", "avg_backward_compute_time",
             "avg_backward_comm_time", "avg_backward_compute_comm_overlap_time")


def ddp_times(device):
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                        torch.nn.Linear(32, 4)).to(device))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            x = torch.randn(8, 16, device=device)
            opt.zero_grad()
            model(x).square().sum().backward()
            opt.step()
    data = model._get_ddp_logging_data()
    return ([str(w.message) for w in caught if "Time stats" in str(w.message)],
            {k: data.get(k, 0) for k in TIME_KEYS})


def test_neuron_module_logs_the_times_a_cpu_module_does(world):
    for warned, times in world.run(ddp_times, "cpu"):
        assert not warned
        assert all(times[k] > 0 for k in TIME_KEYS[:3]), times
    for warned, times in world.run(ddp_times, "neuron"):
        assert not warned, warned
        assert all(times[k] > 0 for k in TIME_KEYS[:3]), times
        assert times["avg_backward_compute_comm_overlap_time"] >= 0
