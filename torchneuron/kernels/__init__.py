"""Kernels: NKI on the software NeuronCore (the language, the ISA and the hardware's rules, in
`kernels/nki/`), `nki_op`, which makes an NKI kernel a PyTorch operator, and the kernel library
(`kernels/library/`: rms_norm, rope, swiglu_mlp, attention, cross_entropy, router_topk, apply).

- `nki/`: `nki.jit`, `nki.language` and `nki.isa` on the software NeuronCore.
- `nki_op.py`: `@nki_op`, a function that calls NKI kernels registered as a PyTorch operator.
- `library/`: the kernel library, common model operations as NKI kernels with a fast path.
- `neuronxcc.py`: `neuronxcc` where AWS's compiler package is not installed (its `nki` is ours)."""

_LIBRARY = ("rms_norm", "rope", "swiglu_mlp", "attention", "cross_entropy", "router_topk",
            "apply", "estimate")


def __getattr__(name):
    # The library registers its operators when first used, so `import nki` stays light.
    if name in _LIBRARY:
        from . import library
        return getattr(library, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
