"""`torchneuron predict`: the predicted step time of a transformer at full size on a machine of
the profile table, from a FakeTensorMode trace (nothing is allocated or run)."""

from __future__ import annotations

import argparse

HELP = "predict a model's step time on trn1/trn2/trn3/H100 from a trace at full size"


def add_subcommand(subparsers) -> None:
    from ..runtime.profiles import MACHINES
    from .predict import WORKLOADS
    from .transformer import CONFIGS

    parser = subparsers.add_parser("predict", help=HELP, description=HELP)
    parser.add_argument("--model", required=True, choices=sorted(CONFIGS))
    parser.add_argument("--machine", default="trn2", choices=sorted(MACHINES))
    parser.add_argument("--workload", default="decode", choices=WORKLOADS)
    parser.add_argument("--batch", type=int, default=1, help="sequences per (data-parallel) rank")
    parser.add_argument("--context", type=int, default=2048,
                        help="decode: KV-cache positions; prefill: prompt tokens; train: sequence")
    parser.add_argument("--ranks", type=int, default=None, help="ranks in all (default: --tp)")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    parser.add_argument("--pp", type=int, default=1, help="pipeline stages (train)")
    parser.add_argument("--fsdp", type=int, default=1, help="FSDP shard degree (train)")
    parser.add_argument("--lnc", type=int, default=None, help="physical cores per rank")
    parser.add_argument("--microbatches", type=int, default=1, help="accumulation steps (train)")
    parser.add_argument("--weight-bytes", type=float, default=2.0,
                        help="bytes per stored weight element (1: int8/fp8 weights)")
    parser.add_argument("--recompute", action="store_true", help="activation checkpointing")
    parser.add_argument("--sequence-parallel", action="store_true", help="prefill: split the "
                        "residual stream over the tp ranks")
    parser.add_argument("--eager", action="store_true",
                        help="every op its own kernel (default: one compiled graph per step)")
    parser.add_argument("--attention", choices=("flash", "materialized"), default=None,
                        help="how attention runs (default: a prefill as the machine's inference "
                        "stack runs it, everything else flash)")
    parser.add_argument("--top", type=int, default=8, help="ops listed (default 8)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .layout import Layout, machine_named
    from .predict import predict
    from .price import mfu, top_ops

    layout = Layout(args.ranks or args.tp * args.pp * args.fsdp, tp=args.tp, pp=args.pp,
                    fsdp=args.fsdp, lnc=args.lnc)
    p = predict(args.model, args.machine, layout, args.workload, args.batch, args.context,
                microbatches=args.microbatches, graph=not args.eager,
                weight_bytes=args.weight_bytes, recompute=args.recompute,
                sequence_parallel=args.sequence_parallel, attention=args.attention)
    pr = p.priced
    print(f"{p.model} {p.workload} on {p.machine} ({layout.describe()}), batch {p.batch}, "
          f"context {p.context}, {'eager' if args.eager else 'one compiled graph'}")
    print(f"  step: {p.seconds * 1e3:.3f} ms   {p.tokens_per_s:,.1f} tokens/s   "
          f"MFU {mfu(pr, machine_named(args.machine), layout):.1%}")
    e = pr.engines
    print(f"  one pass on one rank: {pr.seconds * 1e3:.3f} ms = ops {pr.compute_s * 1e3:.3f} + "
          f"collectives {pr.collective_s * 1e3:.3f} + host stalls {pr.stall_s * 1e3:.3f} + "
          f"launch {pr.launch_s * 1e3:.3f}")
    print(f"  engines summed over ops (ms): tensor {e.tensor * 1e3:.3f}  vector "
          f"{e.vector * 1e3:.3f}  scalar {e.scalar * 1e3:.3f}  dma {e.dma * 1e3:.3f}")
    gib = 1 << 30
    print(f"  HBM per rank: {p.rank_bytes / gib:.1f} GiB of {p.hbm_bytes_per_rank / gib:.1f} GiB "
          f"({'fits' if p.fits else 'DOES NOT FIT'}; weights, caches and optimizer state, "
          f"activations not counted)")
    for name, seconds in p.extra.items():
        if name.endswith("_s"):
            print(f"  {name[:-2].replace('_', ' ')}: {seconds * 1e3:.3f} ms")
    print("  top ops: " + ", ".join(f"{n} {s * 1e3:.3f} ms" for n, s in top_ops(pr, args.top)))
    print(f"  traced {p.ops} ops in {p.trace_s:.1f} s; figures and their sources: "
          f"torchneuron/runtime/profiles.py (MACHINES), accuracy: docs/time-model.md")
    return 0
