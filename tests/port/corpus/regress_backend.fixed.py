"""A distributed trainer's setup: the process-group backend is a command-line option whose
default is NCCL (a one-process world here, so it runs anywhere)."""
import argparse
import json
import socket

import torch
import torch.distributed as dist
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default=torch.distributed.get_default_backend_for_device(accelerator), type=str)
    parser.add_argument("--out", default="backend.json")
    return parser.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    args = get_args()
    device = torch.device(accelerator.type if torch.accelerator.is_available() else "cpu")
    dist.init_process_group(backend=args.backend, init_method=f"tcp://127.0.0.1:{free_port()}",
                            rank=0, world_size=1)
    t = torch.arange(6, dtype=torch.float32).to(device)
    dist.all_reduce(t)
    dist.broadcast(t, src=0)
    dist.destroy_process_group()
    with open(args.out, "w") as f:
        json.dump({"sum": t.cpu().tolist()}, f)


if __name__ == "__main__":
    main()
