"""Each pattern on its own: what `port check` finds (code, + fixable / - hint only) and what
`port fix` writes. A rewrite must be stable (a second fix changes nothing) and must name only
APIs that exist in the installed torch."""

import libcst as cst
import pytest

from torchneuron.port import rules
from torchneuron.port.engine import scan_source

CASES = [
    ('dot_cuda', """\
import torch
x = torch.ones(2).cuda()
""",
     'TNP001+',
     """\
import torch
x = torch.ones(2).to(torch.accelerator.current_accelerator(check_available=True))
"""),
    ('dot_cuda_nb', """\
import torch
x = torch.ones(2).cuda(non_blocking=True)
""",
     'TNP001+',
     """\
import torch
x = torch.ones(2).to(torch.accelerator.current_accelerator(check_available=True), non_blocking=True)
"""),
    ('dot_cuda_idx', """\
import torch
x = torch.ones(2).cuda(1)
""",
     'TNP001+',
     """\
import torch
x = torch.ones(2).to(torch.device((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, 1))
"""),
    ('dot_cuda_unknown', """\
import torch
def f(x, d):
    return x.cuda(d)
""",
     'TNP001-',
     None),
    ('dot_cuda_loop', """\
import torch
for i in range(2):
    x = torch.ones(2).cuda(i)
""",
     'TNP001+',
     """\
import torch
for i in range(2):
    x = torch.ones(2).to(torch.device((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, i))
"""),
    ('dot_cuda_param_int', """\
import torch
def f(x, rank: int):
    return x.cuda(rank)
""",
     'TNP001+',
     """\
import torch
def f(x, rank: int):
    return x.to(torch.device((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, rank))
"""),
    ('to_cuda', """\
import torch
x = torch.ones(2).to('cuda')
""",
     'TNP002+',
     """\
import torch
x = torch.ones(2).to(torch.accelerator.current_accelerator(check_available=True))
"""),
    ('to_cuda0', """\
import torch
x = torch.ones(2).to("cuda:0")
""",
     'TNP002+',
     """\
import torch
x = torch.ones(2).to((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type + ":0")
"""),
    ('to_fstring', """\
import torch
r = 0
x = torch.ones(2).to(f"cuda:{r}")
""",
     'TNP002+',
     """\
import torch
r = 0
x = torch.ones(2).to(f"{(torch.accelerator.current_accelerator(check_available=True) or torch.device('cpu')).type}:{r}")
"""),
    ('to_fstring_single', """\
import torch
r = 0
x = torch.ones(2).to(f'cuda:{r}')
""",
     'TNP002+',
     """\
import torch
r = 0
x = torch.ones(2).to(f'{(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type}:{r}')
"""),
    ('concat', """\
import torch
x = torch.ones(2).to("cuda:" + str(0))
""",
     'TNP002+',
     """\
import torch
x = torch.ones(2).to(((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type + ":") + str(0))
"""),
    ('factory', """\
import torch
x = torch.zeros(3, device="cuda")
""",
     'TNP002+',
     """\
import torch
x = torch.zeros(3, device=torch.accelerator.current_accelerator(check_available=True))
"""),
    ('torch_device', """\
import torch
d = torch.device("cuda")
""",
     'TNP002+',
     """\
import torch
d = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
"""),
    ('torch_device_type', """\
import torch
t = torch.device("cuda").type
""",
     'TNP002+',
     """\
import torch
t = (torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type
"""),
    ('torch_device_idx', """\
import torch
d = torch.device("cuda", 1)
""",
     'TNP002+',
     """\
import torch
d = torch.device((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, 1)
"""),
    ('torch_device_colon', """\
import torch
d = torch.device('cuda:1')
""",
     'TNP002+',
     """\
import torch
d = torch.device((torch.accelerator.current_accelerator(check_available=True) or torch.device('cpu')).type, 1)
"""),
    ('idiom', """\
import torch
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
""",
     'TNP002+ TNP101+',
     """\
import torch
device = torch.device(torch.accelerator.current_accelerator(check_available=True).type if torch.accelerator.is_available() else "cpu")
"""),
    ('idiom_str', """\
import torch
device = "cuda" if torch.cuda.is_available() else "cpu"
""",
     'TNP002+ TNP101+',
     """\
import torch
device = torch.accelerator.current_accelerator(check_available=True).type if torch.accelerator.is_available() else "cpu"
"""),
    ('idiom_devices', """\
import torch
device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
""",
     'TNP002+ TNP101+',
     """\
import torch
device = torch.accelerator.current_accelerator(check_available=True) if torch.accelerator.is_available() else torch.device("cpu")
"""),
    ('idiom_name', """\
import torch
use_cuda = not False and torch.cuda.is_available()
device = torch.device("cuda" if use_cuda else "cpu")
""",
     'TNP101+ TNP002+',
     """\
import torch
use_cuda = not False and torch.accelerator.is_available()
device = torch.device(torch.accelerator.current_accelerator(check_available=True).type if use_cuda else "cpu")
"""),
    ('idiom_if', """\
import torch
if torch.cuda.is_available():
    device = "cuda"
else:
    device = "cpu"
""",
     'TNP101+ TNP002+',
     """\
import torch
if torch.accelerator.is_available():
    device = torch.accelerator.current_accelerator(check_available=True).type
else:
    device = "cpu"
"""),
    ('idiom_not', """\
import torch
device = "cpu" if not torch.cuda.is_available() else "cuda"
""",
     'TNP101+ TNP002+',
     """\
import torch
device = "cpu" if not torch.accelerator.is_available() else torch.accelerator.current_accelerator(check_available=True).type
"""),
    ('idiom_args', """\
import torch
def main(args):
    device = torch.device("cuda" if args.cuda else "cpu")
""",
     'TNP002+',
     """\
import torch
def main(args):
    device = torch.device((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type if args.cuda else "cpu")
"""),
    ('assign_device', """\
import torch
DEVICE = 'cuda'
""",
     'TNP002+',
     """\
import torch
DEVICE = (torch.accelerator.current_accelerator(check_available=True) or torch.device('cpu')).type
"""),
    ('param_default', """\
import torch
def train(model, device="cuda"):
    pass
""",
     'TNP002+',
     """\
import torch
def train(model, device=(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type):
    pass
"""),
    ('is_cuda', """\
import torch
x = torch.ones(2)
if x.is_cuda:
    pass
""",
     'TNP003-',
     None),
    ('compare', """\
import torch
x = torch.ones(2)
if x.device.type == "cuda":
    pass
""",
     'TNP004+',
     """\
import torch
x = torch.ones(2)
if x.device.type != "cpu":
    pass
"""),
    ('compare_in', """\
import torch
def f(t):
    return t in ("cuda", "xpu")
""",
     'TNP004-',
     None),
    ('argparse', """\
import argparse
p = argparse.ArgumentParser()
p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
""",
     'TNP005+ TNP005-',
     """\
import argparse
import torch

p = argparse.ArgumentParser()
p.add_argument("--device", default=(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, choices=["cpu", "cuda"])
"""),
    ('legacy', """\
import torch
x = torch.cuda.FloatTensor(3)
""",
     'TNP006-',
     None),
    ('pin', """\
import torch
l = torch.utils.data.DataLoader([1], batch_size=1, pin_memory=True, pin_memory_device="cuda")
""",
     'TNP007+',
     """\
import torch
l = torch.utils.data.DataLoader([1], batch_size=1, pin_memory=True)
"""),
    ('other_string', """\
import torch
BACKENDS = {"cuda": 1}
""",
     'TNP008-',
     None),
    ('is_available', """\
import torch
ok = torch.cuda.is_available()
""",
     'TNP101+',
     """\
import torch
ok = torch.accelerator.is_available()
"""),
    ('device_count', """\
import torch
n = torch.cuda.device_count()
""",
     'TNP102+',
     """\
import torch
n = torch.accelerator.device_count()
"""),
    ('set_device', """\
import torch
torch.cuda.set_device(0)
""",
     'TNP103+',
     """\
import torch
if torch.accelerator.is_available(): torch.accelerator.set_device_index(0)
"""),
    ('set_device_guarded', """\
import torch
if torch.cuda.is_available():
    torch.cuda.set_device(0)
""",
     'TNP101+ TNP103+',
     """\
import torch
if torch.accelerator.is_available():
    torch.accelerator.set_device_index(0)
"""),
    ('current_device', """\
import torch
i = torch.cuda.current_device()
""",
     'TNP104+',
     """\
import torch
i = torch.accelerator.current_device_index()
"""),
    ('synchronize', """\
import torch
torch.cuda.synchronize()  # wait
""",
     'TNP105+',
     """\
import torch
if torch.accelerator.is_available(): torch.accelerator.synchronize()  # wait
"""),
    ('synchronize_semicolon', """\
import torch
x = 1; torch.cuda.synchronize()
""",
     'TNP105+',
     """\
import torch
x = 1; torch.accelerator.synchronize() if torch.accelerator.is_available() else None
"""),
    ('synchronize_suite', """\
import torch
if True: torch.cuda.synchronize()
""",
     'TNP105+',
     """\
import torch
if True: torch.accelerator.synchronize() if torch.accelerator.is_available() else None
"""),
    ('empty_cache', """\
import torch
torch.cuda.empty_cache()
""",
     'TNP106+',
     """\
import torch
if torch.accelerator.is_available(): torch.accelerator.empty_cache()
"""),
    ('memory', """\
import torch
print(torch.cuda.max_memory_allocated() / 2**20, torch.cuda.memory_allocated(device=0))
""",
     'TNP107+ TNP107+',
     """\
import torch
print((torch.accelerator.max_memory_allocated() if torch.accelerator.is_available() else 0) / 2**20, torch.accelerator.memory_allocated(0) if torch.accelerator.is_available() else 0)
"""),
    ('memory_stats', """\
import torch
s = torch.cuda.memory_stats()
""",
     'TNP107+',
     """\
import torch
s = torch.accelerator.memory_stats() if torch.accelerator.is_available() else {}
"""),
    ('memory_summary', """\
import torch
print(torch.cuda.memory_summary())
""",
     'TNP107-',
     None),
    ('mem_get_info', """\
import torch
free, total = torch.cuda.mem_get_info()
""",
     'TNP107+',
     """\
import torch
free, total = torch.accelerator.get_memory_info()
"""),
    ('event', """\
import torch
e = torch.cuda.Event(enable_timing=True)
f = torch.cuda.Event(True)
""",
     'TNP108+ TNP108+',
     """\
import torch
e = torch.Event(enable_timing=True)
f = torch.Event(enable_timing=True)
"""),
    ('stream', """\
import torch
s = torch.cuda.Stream(priority=-1)
c = torch.cuda.current_stream()
with torch.cuda.stream(s):
    pass
""",
     'TNP109+ TNP109+ TNP109-',
     """\
import torch
s = torch.Stream(priority=-1)
c = torch.accelerator.current_stream()
with torch.cuda.stream(s):
    pass
"""),
    ('seed', """\
import random
import torch
def set_seed(s):
    torch.manual_seed(s)
    random.seed(s)
    torch.cuda.manual_seed_all(s)
""",
     'TNP110+',
     """\
import random
import torch
def set_seed(s):
    torch.manual_seed(s)
    random.seed(s)
"""),
    ('seed_alone', """\
import torch
torch.cuda.manual_seed(1)
""",
     'TNP110+',
     """\
import torch
if torch.accelerator.is_available(): torch.get_device_module().manual_seed(1)
"""),
    ('device_ctx', """\
import torch
with torch.cuda.device(1):
    pass
""",
     'TNP111+',
     """\
import torch
with torch.accelerator.device_index(1):
    pass
"""),
    ('device_ctx_unknown', """\
import torch
def f(d):
    with torch.cuda.device(d):
        pass
""",
     'TNP111-',
     None),
    ('props', """\
import torch
name = torch.cuda.get_device_name(0)
bf16 = torch.cuda.is_bf16_supported()
""",
     'TNP112+ TNP112+',
     """\
import torch
name = torch.get_device_module().get_device_name(0) if torch.accelerator.is_available() else "cpu"
bf16 = torch.get_device_module().is_bf16_supported() if torch.accelerator.is_available() else False
"""),
    ('rng', """\
import torch
s = torch.cuda.get_rng_state()
""",
     'TNP113-',
     None),
    ('graphs', """\
import torch
g = torch.cuda.CUDAGraph()
""",
     'TNP114-',
     None),
    ('nvtx', """\
import torch
torch.cuda.nvtx.range_push("step")
""",
     'TNP115-',
     None),
    ('oom', """\
import torch
try:
    pass
except torch.cuda.OutOfMemoryError:
    pass
""",
     'TNP116+',
     """\
import torch
try:
    pass
except torch.OutOfMemoryError:
    pass
"""),
    ('other_cuda', """\
import torch
ok = torch.cuda.is_initialized()
""",
     'TNP199-',
     None),
    ('autocast', """\
import torch
with torch.cuda.amp.autocast():
    pass
""",
     'TNP201+',
     """\
import torch
with torch.amp.autocast(device_type=(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, dtype=torch.float16, enabled=torch.accelerator.is_available()):
    pass
"""),
    ('autocast_args', """\
import torch
with torch.cuda.amp.autocast(True, torch.bfloat16):
    pass
""",
     'TNP201+',
     """\
import torch
with torch.amp.autocast(device_type=(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, enabled=torch.accelerator.is_available(), dtype=torch.bfloat16):
    pass
"""),
    ('autocast_import', """\
import torch
from torch.cuda.amp import autocast
with autocast(dtype=torch.bfloat16):
    pass
""",
     'TNP201+',
     """\
import torch
with torch.amp.autocast(device_type=(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, dtype=torch.bfloat16, enabled=torch.accelerator.is_available()):
    pass
"""),
    ('autocast_multiline', """\
import torch
with torch.cuda.amp.autocast(
    enabled=True,
    dtype=torch.float16,
):
    pass
""",
     'TNP201+',
     """\
import torch
with torch.amp.autocast(
    device_type=(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type,
    enabled=torch.accelerator.is_available(),
    dtype=torch.float16,
):
    pass
"""),
    ('autocast_new_cuda', """\
import torch
with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
    pass
""",
     'TNP002+',
     """\
import torch
with torch.autocast(device_type=(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, dtype=torch.bfloat16, enabled=torch.accelerator.is_available()):
    pass
"""),
    ('autocast_positional', """\
import torch
with torch.autocast("cuda"):
    pass
""",
     'TNP002+',
     """\
import torch
with torch.autocast((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, enabled=torch.accelerator.is_available()):
    pass
"""),
    ('scaler', """\
import torch
scaler = torch.cuda.amp.GradScaler(init_scale=1024)
""",
     'TNP202+',
     """\
import torch
scaler = torch.amp.GradScaler((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, init_scale=1024, enabled=torch.accelerator.is_available())
"""),
    ('scaler_import_noimport_torch', """\
from torch.cuda.amp import GradScaler
scaler = GradScaler()
""",
     'TNP202+',
     """\
import torch

scaler = torch.amp.GradScaler((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, enabled=torch.accelerator.is_available())
"""),
    ('scaler_new', """\
import torch
scaler = torch.amp.GradScaler("cuda")
""",
     'TNP002+',
     """\
import torch
scaler = torch.amp.GradScaler((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, enabled=torch.accelerator.is_available())
"""),
    ('custom_fwd', """\
import torch
class F(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd
    def forward(ctx, x):
        return x
    @staticmethod
    @torch.cuda.amp.custom_bwd
    def backward(ctx, g):
        return g
""",
     'TNP203+ TNP203+',
     """\
import torch
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
class F(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type=accelerator.type)
    def forward(ctx, x):
        return x
    @staticmethod
    @torch.amp.custom_bwd(device_type=accelerator.type)
    def backward(ctx, g):
        return g
"""),
    ('custom_fwd_cast', """\
import torch
@torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
def f(x):
    return x
""",
     'TNP203+',
     """\
import torch
@torch.amp.custom_fwd(cast_inputs=torch.float32, device_type=(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type)
def f(x):
    return x
"""),
    ('cudnn_benchmark', """\
import torch
torch.backends.cudnn.benchmark = True
""",
     'TNP301-',
     None),
    ('cudnn_det', """\
import torch
torch.backends.cudnn.deterministic = True
""",
     'TNP302-',
     None),
    ('tf32', """\
import torch
torch.backends.cuda.matmul.allow_tf32 = True
""",
     'TNP303-',
     None),
    ('cudnn_tf32', """\
from torch.backends import cudnn
cudnn.allow_tf32 = True
""",
     'TNP304-',
     None),
    ('sdp', """\
import torch
with torch.backends.cuda.sdp_kernel(enable_flash=True):
    pass
""",
     'TNP305-',
     None),
    ('cudnn_enabled', """\
import torch
torch.backends.cudnn.enabled = False
""",
     'TNP306-',
     None),
    ('compile_mode', """\
import torch
m = torch.compile(torch.nn.Linear(2, 2), mode="max-autotune")
""",
     'TNP401-',
     None),
    ('triton', """\
import triton
import triton.language as tl
""",
     'TNP402- TNP402-',
     None),
    ('nccl', """\
import torch.distributed as dist
dist.init_process_group(backend="nccl", init_method="env://")
""",
     'TNP501+',
     """\
import torch.distributed as dist
import torch

dist.init_process_group(backend=dist.get_default_backend_for_device(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")), init_method="env://")
"""),
    ('nccl_positional', """\
import torch.distributed as dist
dist.init_process_group("nccl", "env://")
""",
     'TNP501+',
     """\
import torch.distributed as dist
import torch

dist.init_process_group(dist.get_default_backend_for_device(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")), "env://")
"""),
    ('nccl_idiom', """\
import torch
import torch.distributed as dist
dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
""",
     'TNP501+ TNP101+',
     """\
import torch
import torch.distributed as dist
dist.init_process_group(backend=dist.get_default_backend_for_device(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")))
"""),
    ('nccl_multiline', """\
import torch.distributed as dist
dist.init_process_group(
    backend="nccl",
    world_size=2,
)
""",
     'TNP501+',
     """\
import torch.distributed as dist
import torch

dist.init_process_group(
    backend=dist.get_default_backend_for_device(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")),
    world_size=2,
)
"""),
    ('nccl_last', """\
import torch.distributed as dist
dist.init_process_group(
    world_size=2,
    backend="nccl",
)
""",
     'TNP501+',
     """\
import torch.distributed as dist
import torch

dist.init_process_group(
    world_size=2,
    backend=dist.get_default_backend_for_device(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")),
)
"""),
    ('nccl_var', """\
import argparse
p = argparse.ArgumentParser()
p.add_argument("--backend", default="nccl")
""",
     'TNP501+',
     """\
import argparse
import torch

p = argparse.ArgumentParser()
p.add_argument("--backend", default=torch.distributed.get_default_backend_for_device(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")))
"""),
    ('nccl_enum', """\
import torch.distributed as dist
dist.init_process_group(backend=dist.Backend.NCCL)
""",
     'TNP501+',
     """\
import torch.distributed as dist
import torch

dist.init_process_group(backend=dist.get_default_backend_for_device(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")))
"""),
    ('ddp', """\
import os
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
rank = int(os.environ['LOCAL_RANK'])
m = DDP(torch.nn.Linear(2, 2), device_ids=[rank], output_device=rank)
""",
     'TNP502+ TNP502+',
     """\
import os
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
rank = int(os.environ['LOCAL_RANK'])
m = DDP(torch.nn.Linear(2, 2), device_ids=[rank] if torch.accelerator.is_available() else None, output_device=rank if torch.accelerator.is_available() else None)
"""),
    ('dp', """\
import torch
m = torch.nn.DataParallel(torch.nn.Linear(2, 2))
""",
     'TNP503-',
     None),
    ('env', """\
import os
os.environ["CUDA_VISIBLE_DEVICES"] = "0"
os.environ["NCCL_DEBUG"] = "INFO"
os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
""",
     'TNP601- TNP602- TNP603-',
     None),
    ('noqa', """\
import torch
torch.cuda.synchronize()  # noqa: TNP105
""",
     '',
     None),
    ('shadowed', """\
def f(torch):
    return torch.cuda.is_available()
""",
     '',
     None),
    ('no_torch_import', """\
x = y.cuda()
""",
     'TNP001+',
     """\
import torch

x = y.to(torch.accelerator.current_accelerator(check_available=True))
"""),
    ('alias_module', """\
import torch.cuda as tc
tc.synchronize()
""",
     'TNP105+',
     """\
import torch

if torch.accelerator.is_available(): torch.accelerator.synchronize()
"""),
    ('from_torch_import_cuda', """\
from torch import cuda
n = cuda.device_count()
""",
     'TNP102+',
     """\
import torch

n = torch.accelerator.device_count()
"""),
    ('bare_ref', """\
import torch
f = torch.cuda.is_available
""",
     'TNP101+',
     """\
import torch
f = torch.accelerator.is_available
"""),
    ('monkeypatch', """\
import torch
torch.cuda.is_available = lambda: False
""",
     'TNP101-',
     None),
    ('map_location', """\
import torch
s = torch.load("x.pt", map_location="cuda:0")
""",
     'TNP002+',
     """\
import torch
s = torch.load("x.pt", map_location=(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type + ":0")
"""),
    ('generator', """\
import torch
g = torch.Generator(device="cuda")
""",
     'TNP002+',
     """\
import torch
g = torch.Generator(device=(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type)
"""),
    ('docstring', 'def f():\n    """cuda"""\n',
     '',
     None),
    ('set_default_device', """\
import torch
torch.set_default_device("cuda")
""",
     'TNP002+',
     """\
import torch
torch.set_default_device((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type)
"""),
    ('new_zeros', """\
import torch
y = torch.ones(2).new_zeros(3, device="cuda")
""",
     'TNP002+',
     """\
import torch
y = torch.ones(2).new_zeros(3, device=(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type)
"""),
    ('guard_and', """\
import torch
name = torch.cuda.is_available() and torch.cuda.current_device()
""",
     'TNP101+ TNP104+',
     """\
import torch
name = torch.accelerator.is_available() and torch.accelerator.current_device_index()
"""),
    ('count_guard', """\
import torch
if torch.cuda.device_count() > 0:
    torch.cuda.empty_cache()
""",
     'TNP102+ TNP106+',
     """\
import torch
if torch.accelerator.device_count() > 0:
    torch.accelerator.empty_cache()
"""),
    ('crlf', 'import torch\r\nx = torch.ones(2).cuda()  # move\r\n',
     'TNP001+',
     'import torch\r\nx = torch.ones(2).to(torch.accelerator.current_accelerator(check_available=True))  # move\r\n'),
    ('comments_kept', """\
import torch
# set up
model = torch.nn.Linear(2, 2)  # tiny
model = model.cuda()  # to GPU
""",
     'TNP001+',
     """\
import torch
# set up
model = torch.nn.Linear(2, 2)  # tiny
model = model.to(torch.accelerator.current_accelerator(check_available=True))  # to GPU
"""),
    ('star_args', """\
import torch
def f(*a):
    return torch.cuda.memory_allocated(*a)
""",
     'TNP107-',
     None),
    ('tuple_unpack_not_index', """\
import torch
rank, world = 0, 2
x = torch.ones(2).cuda(rank)
""",
     'TNP001-',
     None),
    ('new_group', """\
import torch.distributed as dist
g = dist.new_group([0, 1], None, "nccl")
""",
     'TNP501+',
     """\
import torch.distributed as dist
import torch

g = dist.new_group([0, 1], None, dist.get_default_backend_for_device(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")))
"""),
    ('backend_string_mixed', """\
import torch.distributed as dist
dist.init_process_group("cpu:gloo,cuda:nccl")
""",
     'TNP501-',
     None),
    ('storage_lambda', """\
import torch
s = torch.load("x.pt", map_location=lambda storage, loc: storage.cuda())
""",
     'TNP001-',
     None),
    ('reduce_overhead', """\
import torch
f = torch.compile(lambda x: x, mode='reduce-overhead')
""",
     'TNP401-',
     None),
    ('inductor_triton', """\
import torch._inductor.config as cfg
cfg.triton.cudagraphs = True
""",
     'TNP402-',
     None),
    ('torch_cuda_module', """\
import torch
mod = torch.cuda
""",
     'TNP199-',
     None),
    ('legacy_isinstance', """\
import torch
ok = isinstance(torch.ones(1), torch.cuda.FloatTensor)
""",
     'TNP006-',
     None),
    ('device_module_arg', """\
import torch
p = torch.cuda.get_device_properties("cuda")
m = torch.cuda.memory_allocated("cuda:0")
""",
     'TNP112- TNP002+ TNP107+ TNP002+',
     """\
import torch
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
p = torch.cuda.get_device_properties(accelerator.type)
m = torch.accelerator.memory_allocated(accelerator.type + ":0") if torch.accelerator.is_available() else 0
"""),
    ('inside_fstring', """\
import torch
print(f"{torch.ones(1).cuda(0)}")
""",
     'TNP001+',
     """\
import torch
print(f"{torch.ones(1).to(torch.device((torch.accelerator.current_accelerator(check_available=True) or torch.device('cpu')).type, 0))}")
"""),
    ('pin_multiline', """\
import torch
l = torch.utils.data.DataLoader(
    [1],
    pin_memory=True,
    pin_memory_device="cuda",
)
""",
     'TNP007+',
     """\
import torch
l = torch.utils.data.DataLoader(
    [1],
    pin_memory=True,
)
"""),
    ('pin_middle', """\
import torch
l = torch.utils.data.DataLoader([1], pin_memory_device='cuda', pin_memory=True)
""",
     'TNP007+',
     """\
import torch
l = torch.utils.data.DataLoader([1], pin_memory=True)
"""),
    ('type_idiom', """\
import torch
device = 'cuda:0'
device_type = 'cuda' if 'cuda' in device else 'cpu'
ctx = torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)
""",
     'TNP002+ TNP004+',
     """\
import torch
device = (torch.accelerator.current_accelerator(check_available=True) or torch.device('cpu')).type + ':0'
device_type = torch.device(device).type
ctx = torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)
"""),
    ('type_idiom_type', """\
import torch
def f(x):
    return 'cuda' if x.device.type == 'cuda' else 'cpu'
""",
     'TNP004+',
     """\
import torch
def f(x):
    return x.device.type
"""),
    ('type_idiom_exact', """\
import torch
def f(device):
    return 'cuda' if device == 'cuda' else 'cpu'
""",
     'TNP004-',
     None),
    ('type_equal', """\
import torch
def configure(model, device_type):
    fused = device_type == 'cuda'
    return torch.optim.AdamW(model.parameters(), fused=fused)
""",
     'TNP004+',
     """\
import torch
def configure(model, device_type):
    fused = device_type != 'cpu'
    return torch.optim.AdamW(model.parameters(), fused=fused)
"""),
    ('type_not_equal', """\
import torch
def pin(x):
    return x if x.device.type != 'cuda' else x.pin_memory()
""",
     'TNP004+',
     """\
import torch
def pin(x):
    return x if x.device.type == 'cpu' else x.pin_memory()
"""),
    ('type_in_string', """\
import torch
def f(x, device):
    if 'cuda' in device:
        x = x.pin_memory()
    return x
""",
     'TNP004+',
     """\
import torch
def f(x, device):
    if torch.device(device).type != 'cpu':
        x = x.pin_memory()
    return x
"""),
    ('type_not_in_string', """\
import torch
def f(device):
    return 'cuda' not in str(device)
""",
     'TNP004+',
     """\
import torch
def f(device):
    return torch.device(str(device)).type == 'cpu'
"""),
    ('type_startswith', """\
import torch
def f(x, device: str):
    return x.pin_memory() if device.startswith('cuda') else x
""",
     'TNP004+',
     """\
import torch
def f(x, device: str):
    return x.pin_memory() if torch.device(device).type != 'cpu' else x
"""),
    ('type_literal_var', """\
import torch
device = "cuda" if torch.cuda.is_available() else "cpu"
use_amp = device == "cuda"
""",
     'TNP002+ TNP101+ TNP004+',
     """\
import torch
device = torch.accelerator.current_accelerator(check_available=True).type if torch.accelerator.is_available() else "cpu"
use_amp = device != "cpu"
"""),
    ('type_exact_string', """\
import torch
def f(dev):
    return dev == 'cuda'
""",
     'TNP004-',
     None),
    ('type_in_parens', """\
import torch
def f(x):
    return 1 + x.device.type.startswith('cuda')
""",
     'TNP004+',
     """\
import torch
def f(x):
    return 1 + (x.device.type != 'cpu')
"""),
    ('props_guarded', """\
import torch
bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
if torch.cuda.is_available():
    mem = torch.cuda.get_device_properties(0).total_memory
    major, minor = torch.cuda.get_device_capability()
""",
     'TNP101+ TNP112+ TNP101+ TNP112+ TNP112+',
     """\
import torch
bf16 = torch.accelerator.is_available() and torch.get_device_module().is_bf16_supported()
if torch.accelerator.is_available():
    mem = torch.get_device_module().get_device_properties(0).total_memory
    major, minor = torch.get_device_module().get_device_capability()
"""),
    ('props_unguarded', """\
import torch
flash = torch.cuda.get_device_capability()[0] >= 8
mem = torch.cuda.get_device_properties(0).total_memory
""",
     'TNP112+ TNP112-',
     """\
import torch
flash = (torch.get_device_module().get_device_capability() if torch.accelerator.is_available() else (0, 0))[0] >= 8
mem = torch.cuda.get_device_properties(0).total_memory
"""),
    ('seed_comment', """\
import torch
def set_seed(s):
    torch.manual_seed(s)
    # and every GPU
    torch.cuda.manual_seed_all(s)
    return s
""",
     'TNP110+',
     """\
import torch
def set_seed(s):
    torch.manual_seed(s)
    # and every GPU
    return s
"""),
    ('seed_comment_last', """\
import torch
def set_seed(s):
    torch.manual_seed(s)
    # and every GPU
    torch.cuda.manual_seed_all(s)
""",
     'TNP110+',
     """\
import torch
def set_seed(s):
    torch.manual_seed(s)
    # and every GPU
"""),
    ('seed_both', """\
import torch
torch.manual_seed(0)
torch.cuda.manual_seed(0)
torch.cuda.manual_seed_all(0)
x = 1
""",
     'TNP110+ TNP110+',
     """\
import torch
torch.manual_seed(0)
x = 1
"""),
    ('seed_before', """\
import torch
torch.cuda.manual_seed(3)
torch.manual_seed(3)
""",
     'TNP110+',
     """\
import torch
torch.manual_seed(3)
"""),
    ('fstring_var', """\
import torch
def load(path, gpu_id: int):
    loc = f"cuda:{gpu_id}"
    return torch.load(path, map_location=loc)
""",
     'TNP002+',
     """\
import torch
def load(path, gpu_id: int):
    loc = f"{torch.accelerator.current_accelerator(check_available=True).type}:{gpu_id}" if torch.accelerator.is_available() else "cpu"
    return torch.load(path, map_location=loc)
"""),
    ('indexed_anywhere', """\
import torch
maps = {"cuda:1": "cuda:0"}
names = ["cuda:0"]
""",
     'TNP002+ TNP002+ TNP002+',
     """\
import torch
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
maps = {accelerator.type + ":1" if torch.accelerator.is_available() else "cpu": accelerator.type + ":0" if torch.accelerator.is_available() else "cpu"}
names = [accelerator.type + ":0" if torch.accelerator.is_available() else "cpu"]
"""),
    ('concat_var', """\
import torch
def f(rank):
    where = "cuda:" + str(rank)
    return where
""",
     'TNP002+',
     """\
import torch
def f(rank):
    where = (torch.accelerator.current_accelerator(check_available=True).type + ":") + str(rank) if torch.accelerator.is_available() else "cpu"
    return where
"""),
    ('int_to', """\
import os
import torch
local_rank = int(os.environ["LOCAL_RANK"])
x = torch.ones(2).to(local_rank, non_blocking=True)
""",
     'TNP009+',
     """\
import os
import torch
local_rank = int(os.environ["LOCAL_RANK"])
x = torch.ones(2).to(torch.device((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, local_rank), non_blocking=True)
"""),
    ('int_self_attr', """\
import torch
class Trainer:
    def __init__(self, model, gpu_id: int):
        self.gpu_id = gpu_id
        self.model = model.to(gpu_id)
    def step(self, x):
        return self.model(x.to(self.gpu_id))
""",
     'TNP009+ TNP009+',
     """\
import torch
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
class Trainer:
    def __init__(self, model, gpu_id: int):
        self.gpu_id = gpu_id
        self.model = model.to(torch.device(accelerator.type, gpu_id))
    def step(self, x):
        return self.model(x.to(torch.device(accelerator.type, self.gpu_id)))
"""),
    ('int_self_attr_cuda', """\
import os
import torch
class Trainer:
    def __init__(self, model):
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = model.cuda(self.gpu_id)
""",
     'TNP001+',
     """\
import os
import torch
class Trainer:
    def __init__(self, model):
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = model.to(torch.device((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, self.gpu_id))
"""),
    ('int_self_unknown', """\
import torch
class Trainer:
    def __init__(self, gpu_id: int):
        self.gpu_id = gpu_id
    def stop(self):
        self.gpu_id = None
    def step(self, x):
        return x.to(self.gpu_id)
""",
     '',
     None),
    ('hoist_functions', """\
import os
import torch

SEED = 0

try:
    import numpy
except ImportError:
    numpy = None


def f(x):
    return x.to("cuda:0")


def g(y):
    return y.to("cuda:1")
""",
     'TNP002+ TNP002+',
     """\
import os
import torch
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")

SEED = 0

try:
    import numpy
except ImportError:
    numpy = None


def f(x):
    return x.to(accelerator.type + ":0")


def g(y):
    return y.to(accelerator.type + ":1")
"""),
    ('int_factory', """\
import torch
def f(rank: int):
    return torch.zeros(3, device=rank)
""",
     'TNP009+',
     """\
import torch
def f(rank: int):
    return torch.zeros(3, device=torch.device((torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, rank))
"""),
    ('int_literal', """\
import torch
x = torch.ones(2).to(0)  # the first GPU
y = torch.ones(2).to(device=1)
""",
     'TNP009+ TNP009+',
     """\
import torch
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
x = torch.ones(2).to(torch.device(accelerator.type, 0))  # the first GPU
y = torch.ones(2).to(device=torch.device(accelerator.type, 1))
"""),
    ('int_not_dtype', """\
import torch
x = torch.ones(2).to(torch.float16)
y = torch.cuda.memory_allocated(0)
""",
     'TNP107+',
     """\
import torch
x = torch.ones(2).to(torch.float16)
y = torch.accelerator.memory_allocated(0) if torch.accelerator.is_available() else 0
"""),
    ('hoist_function', """\
import torch
def main(rank: int):
    'Train.'
    model = torch.nn.Linear(2, 2).cuda()
    x = torch.ones(2, device="cuda")
    return model(x).to(f"cuda:{rank}")
""",
     'TNP001+ TNP002+ TNP002+',
     """\
import torch
def main(rank: int):
    'Train.'
    accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
    model = torch.nn.Linear(2, 2).to(accelerator)
    x = torch.ones(2, device=accelerator)
    return model(x).to(f"{accelerator.type}:{rank}")
"""),
    ('hoist_module', """\
import torch
import torch.nn as nn

model = nn.Linear(2, 2).to('cuda:0')
x = torch.ones(2).to('cuda:0')
""",
     'TNP002+ TNP002+',
     """\
import torch
import torch.nn as nn
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device('cpu')

model = nn.Linear(2, 2).to(accelerator.type + ':0')
x = torch.ones(2).to(accelerator.type + ':0')
"""),
    ('hoist_name_taken', """\
import torch
accelerator = None
def f(x, y):
    return x.to("cuda:0"), y.to("cuda:1")
""",
     'TNP002+ TNP002+',
     """\
import torch
accelerator = None
def f(x, y):
    accelerator_device = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
    return x.to(accelerator_device.type + ":0"), y.to(accelerator_device.type + ":1")
"""),
    ('hoist_once_inline', """\
import torch
def f(x):
    return x.to("cuda:0")
def g(y):
    return y.to("cuda:1")
""",
     'TNP002+ TNP002+',
     """\
import torch
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
def f(x):
    return x.to(accelerator.type + ":0")
def g(y):
    return y.to(accelerator.type + ":1")
"""),
    ('hoist_nested', """\
import torch
def outer(x):
    a = x.to("cuda:0")
    def inner(y):
        return y.to("cuda:1")
    return a.to("cuda:1"), inner
""",
     'TNP002+ TNP002+ TNP002+',
     """\
import torch
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
def outer(x):
    a = x.to(accelerator.type + ":0")
    def inner(y):
        return y.to(accelerator.type + ":1")
    return a.to(accelerator.type + ":1"), inner
"""),
    ('hoist_decorator', """\
import torch
def f():
    @torch.cuda.amp.custom_fwd
    def g(ctx, x):
        return x.to("cuda:0")
    return g
""",
     'TNP203+ TNP002+',
     """\
import torch
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
def f():
    @torch.amp.custom_fwd(device_type=accelerator.type)
    def g(ctx, x):
        return x.to(accelerator.type + ":0")
    return g
"""),
    # --- a fix never makes a program worse (issue 46) ---
    ('guard_blocked_by_body', """\
import torch
import torch.nn as nn
def place(model, device):
    if device.type == "cuda":
        model.cuda(device)
        model = nn.DataParallel(model)
    return model
""",
     'TNP004- TNP001- TNP503-',
     None),
    ('guard_kept_leaves_body', """\
import time
import torch
def step(device):
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    return time.time()
""",
     'TNP004- TNP105- TNP107-',
     None),
    ('guard_inert_body', """\
import torch
def setup(device):
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
""",
     'TNP004+ TNP301-',
     """\
import torch
def setup(device):
    if device.type != "cpu":
        torch.backends.cudnn.benchmark = True
"""),
    ('guard_not_stacked', """\
import torch
def timed(x):
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    return x
""",
     'TNP004+ TNP105+',
     """\
import torch
def timed(x):
    if x.device.type != "cpu":
        torch.accelerator.synchronize()
    return x
"""),
    ('guard_nested_kept', """\
import torch
def f(x, device):
    if x.device.type == "cuda":
        if device == "cuda":
            torch.cuda.synchronize()
    return x
""",
     'TNP004+ TNP004- TNP105-',
     """\
import torch
def f(x, device):
    if x.device.type != "cpu":
        if device == "cuda":
            torch.cuda.synchronize()
    return x
"""),
    ('seed_guarded', """\
import torch
def seed(s):
    if torch.cuda.is_available():
        torch.cuda.manual_seed(s)
""",
     'TNP101+ TNP110+',
     """\
import torch
def seed(s):
    if torch.accelerator.is_available():
        torch.get_device_module().manual_seed(s)
"""),
    ('seed_guard_next_to_torch_seed', """\
import torch
def seed(s):
    torch.manual_seed(s)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(s)
""",
     'TNP101+ TNP110+',
     """\
import torch
def seed(s):
    torch.manual_seed(s)
"""),
    ('autocast_default_float16', """\
import torch
def forward(model, x):
    with torch.cuda.amp.autocast():
        return model(x)
""",
     'TNP201+',
     """\
import torch
def forward(model, x):
    with torch.amp.autocast(device_type=(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type, dtype=torch.float16, enabled=torch.accelerator.is_available()):
        return model(x)
"""),
    ('autocast_enabled_flag', """\
import torch
def forward(model, x, amp):
    scaler = torch.cuda.amp.GradScaler(enabled=amp)
    with torch.cuda.amp.autocast(enabled=amp):
        return model(x), scaler
""",
     'TNP202+ TNP201+',
     """\
import torch
def forward(model, x, amp):
    accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
    scaler = torch.amp.GradScaler(accelerator.type, enabled=amp and torch.accelerator.is_available())
    with torch.amp.autocast(device_type=accelerator.type, enabled=amp and torch.accelerator.is_available(), dtype=torch.float16):
        return model(x), scaler
"""),
    ('autocast_guarded', """\
import torch
def forward(model, x):
    if torch.cuda.is_available():
        with torch.cuda.amp.autocast():
            return model(x)
    return model(x)
""",
     'TNP101+ TNP201+',
     """\
import torch
def forward(model, x):
    if torch.accelerator.is_available():
        with torch.amp.autocast(device_type=torch.accelerator.current_accelerator(check_available=True).type, dtype=torch.float16):
            return model(x)
    return model(x)
"""),
    ('nccl_option_default', """\
import argparse
import torch.distributed as dist
p = argparse.ArgumentParser()
p.add_argument("--dist-backend", default="nccl", type=str)
""",
     'TNP501+',
     """\
import argparse
import torch.distributed as dist
import torch

p = argparse.ArgumentParser()
p.add_argument("--dist-backend", default=torch.distributed.get_default_backend_for_device(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")), type=str)
"""),
    ('data_parallel_functional', """\
import torch
from torch.nn.parallel import data_parallel
def run(model, x):
    return data_parallel(model, x)
""",
     'TNP503-',
     None),
    ('device_type_param_given_device', """\
import torch
def configure(model, device_type):
    return torch.optim.AdamW(model.parameters(), fused=device_type == "cuda")
def main(model, device):
    return configure(model, device)
""",
     'TNP004-',
     None),
]


@pytest.mark.parametrize("name, source, found, fixed", CASES, ids=[c[0] for c in CASES])
def test_case(name, source, found, fixed):
    findings, new = scan_source(source, fix=True)
    assert " ".join(f"{f.code}{'+' if f.fixable else '-'}" for f in findings) == found
    assert new == (source if fixed is None else fixed)
    assert "__tnp_" not in new, "a placeholder for the accelerator was left in the rewrite"
    again, newer = scan_source(new, fix=True)
    assert newer == new, "a second fix changed the file again"
    assert not any(f.fixable for f in again)


def test_every_code_has_a_case():
    seen = {token[:-1] for _, _, found, _ in CASES for token in found.split()}
    assert seen == set(rules.RULES)


def _torch_names(source):
    names = set()

    class Names(cst.CSTVisitor):
        def visit_Attribute(self, node):
            code = cst.Module([]).code_for_node(node)
            if code.startswith("torch.") and "(" not in code:
                names.add(code)

    cst.parse_module(source).visit(Names())
    return names


def test_rewrites_use_apis_that_exist():
    torch = pytest.importorskip("torch")
    written = set()
    for _, source, _, fixed in CASES:
        if fixed is not None:
            written |= _torch_names(fixed) - _torch_names(source)
    assert "torch.accelerator.current_accelerator" in written
    for name in sorted(written):
        obj = torch
        for part in name.split(".")[1:]:
            assert hasattr(obj, part), f"{name} does not exist in torch {torch.__version__}"
            obj = getattr(obj, part)
