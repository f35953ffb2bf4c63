"""Ops layer: Python-level registrations with a reason to exist: the float64 policy, autocast
op lists, the one module of op lists (op_lists.py) everything else reads, and the op-support
table (which ATen ops Trainium runs natively, on the host, or not at all).

- `op_lists.py`: the one place op lists live, each list saying why its members belong to it.
- `dtype_policy.py`: the float64 policy (NEURON_FLOAT64): compute as the CPU does, warn or raise.
- `autocast.py`: torch.autocast("neuron") with bfloat16 by default; reads the C++ op lists.
- `linear_cross_entropy.py`: F.linear_cross_entropy accumulates as on the CPU (float32).
- `recurrent.py`: nn.LSTM, nn.GRU and nn.RNN run the CPU's whole recurrent op, not cell by cell.
- `op_support.py`: the op-support rule: `classify(op, dtype, layout)` says whether Trainium would
  run an ATen op natively, as a host fallback or not at all, and which source decided.
- `op_support_aws.py`: what AWS publishes about operator support, as data with its URLs and
  versions.
- `op_support_page.py`: docs/op-support.md rendered from the rule, and the staleness check.
- `cli.py`: the `torchneuron op-support [--check]` subcommand."""
