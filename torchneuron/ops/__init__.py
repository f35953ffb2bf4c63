"""Ops layer: Python-level registrations with a reason to exist: the float64 policy, autocast
op lists, and the one module of op lists (op_lists.py) everything else reads.

- `op_lists.py`: the one place op lists live, each list saying why its members belong to it.
- `dtype_policy.py`: the float64 policy (NEURON_FLOAT64): compute as the CPU does, warn or raise.
- `autocast.py`: torch.autocast("neuron") with bfloat16 by default; reads the C++ op lists.
- `linear_cross_entropy.py`: F.linear_cross_entropy accumulates as on the CPU (float32).
- `recurrent.py`: nn.LSTM, nn.GRU and nn.RNN run the CPU's whole recurrent op, not cell by cell."""
