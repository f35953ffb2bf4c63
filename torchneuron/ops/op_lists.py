"""The one place op lists live. Each list says why its members belong to it.

Autocast's op lists are the exception that proves the rule: they are registered in C++ for the
AutocastPrivateUse1 key, so they live in csrc/ops/Autocast.cpp (CUDA's lists, from ATen's shared
macros) and Python reads them with `torchneuron.ops.autocast.op_lists()`."""

# Ops that only move, fill, view or compare bits: they run on float64 (and complex128) tensors
# under every float64 policy, because storing float64 on the device is fine; only arithmetic is
# missing on Trainium.
FLOAT64_DATA_MOVEMENT_OPS = (
    "aten::fill_", "aten::zero_", "aten::clone", "aten::contiguous", "aten::copy_",
    "aten::_to_copy", "aten::cat", "aten::stack", "aten::index", "aten::index_select",
    "aten::gather", "aten::scatter", "aten::scatter_", "aten::index_put", "aten::index_put_",
    "aten::_index_put_impl_", "aten::masked_fill", "aten::masked_fill_", "aten::masked_select",
    "aten::masked_scatter_", "aten::where", "aten::flip", "aten::roll", "aten::repeat",
    "aten::unfold", "aten::view_as_real", "aten::view_as_complex", "aten::_conj",
    "aten::resolve_conj", "aten::resolve_neg", "aten::_neg_view", "aten::constant_pad_nd",
    "aten::eq", "aten::ne", "aten::equal", "aten::isnan", "aten::isinf", "aten::isfinite",
    "aten::nonzero", "aten::_unsafe_view", "aten::unbind", "aten::split", "aten::split_with_sizes",
    "aten::narrow_copy", "aten::tril", "aten::triu", "aten::diagonal_scatter",
    "aten::slice_scatter", "aten::select_scatter", "aten::as_strided_scatter",
    "aten::_local_scalar_dense", "aten::set_", "aten::lift_fresh_copy", "aten::detach",
    "aten::alias", "aten::permute", "aten::expand", "aten::t", "aten::transpose",
    "aten::view", "aten::reshape", "aten::squeeze", "aten::unsqueeze", "aten::select",
    "aten::slice", "aten::diagonal", "aten::as_strided", "aten::_reshape_alias",
    "aten::empty_like", "aten::zeros_like", "aten::ones_like", "aten::full_like",
    "aten::new_empty", "aten::new_zeros", "aten::new_ones", "aten::new_full",
    "aten::empty_strided", "aten::empty", "aten::zeros", "aten::ones", "aten::full",
    "aten::complex", "aten::real", "aten::imag", "aten::sort", "aten::argsort",
    "aten::unique_consecutive", "aten::_unique2", "aten::topk", "aten::max", "aten::min",
    "aten::amax", "aten::amin", "aten::argmax", "aten::argmin", "aten::maximum", "aten::minimum",
)


# Ops that allocate, copy, resize, re-point or pin device memory: the device's own memory work,
# no arithmetic (the op-support table's rule counts them native; most have neuron kernels of
# their own in csrc/aten/native/Memory.cpp).
MEMORY_OPS = (
    "aten::_copy_from", "aten::_copy_from_and_resize", "aten::resize_", "aten::resize",
    "aten::_resize_output_", "aten::_resize_output", "aten::set_", "aten::set",
    "aten::record_stream", "aten::_pin_memory", "aten::is_pinned", "aten::empty_permuted",
    "aten::new_empty_strided", "aten::lift", "aten::_lazy_clone",
    "aten::_has_compatible_shallow_copy_type", "aten::_efficientzerotensor",
)


# Not a hand list: ops with a CPU kernel that the dispatcher would give neuron as a
# CompositeExplicitAutograd decomposition (native_layer_norm, native_group_norm, addr, _stack,
# all/any.dims on 2.13) are found in the dispatcher at import by csrc/aten/Fallback.cpp
# (route_to_cpu_kernels) and listed in torchneuron.ROUTED_TO_CPU_KERNELS.

# ATen's recurrent ops, composite: the CPU runs each as one path (oneDNN's RNN, forward and
# backward), other devices as a cell per step. On neuron they run the CPU's op on copies of their
# arguments, bit for bit and at the CPU's speed (torchneuron/ops/recurrent.py).
RECURRENT_OPS = (
    "lstm.input", "lstm.data", "gru.input", "gru.data", "rnn_tanh.input", "rnn_tanh.data",
    "rnn_relu.input", "rnn_relu.data",
)

# Reductions that may end a fused eager chain (csrc/fused_eager/FusibleOps.h): Inductor lowers
# them into the same loop nest as the pointwise ops feeding them. Only one, at the end of a chain
# (a later op would read a reduced shape).
CHAIN_ENDING_REDUCTIONS = (
    "aten::sum.default", "aten::sum.dim_IntList", "aten::mean.default", "aten::mean.dim",
    "aten::amax.default", "aten::amin.default", "aten::prod.default", "aten::prod.dim_int",
)
