"""torchneuron.kernels.apply(model): the library's ops inside a Hugging Face model, unchanged
otherwise.

The matching modules of Llama, Qwen2 and Mixtral get a forward of the library (set on the
instance, so parameters, state_dict keys, hooks and the optimizer's view stay as they were):

  *RMSNorm                  rms_norm
  *Attention                rope on q and k, then attention (when Hugging Face passes no mask:
                            no padding, causal or single-query; otherwise Hugging Face's own
                            forward runs)
  *MLP (SiLU, no biases)    swiglu_mlp
  MixtralTopKRouter         router_topk
  *ForCausalLM loss         cross_entropy over the logits (chunked over the vocabulary)

Each swapped forward runs the library only for float32/bfloat16 tensors on neuron and falls back
to the module's own forward otherwise, so an applied model still runs on the CPU.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F

from .attention import attention
from .checks import FLOAT_DTYPES, is_neuron
from .cross_entropy import cross_entropy
from .rms_norm import rms_norm
from .rope import rope
from .router import router_topk
from .swiglu import swiglu_mlp

FAMILIES = ("Llama", "Qwen2", "Mixtral")


def _on_device(*tensors) -> bool:
    return all(t.dtype in FLOAT_DTYPES and is_neuron(t.device) for t in tensors)


def _original(module):
    return type(module).forward.__get__(module)


# ---- the swapped forwards ---------------------------------------------------------------------

def _rms_norm_forward(self, hidden_states):
    if not _on_device(hidden_states, self.weight):
        return _original(self)(hidden_states)
    return rms_norm(hidden_states, self.weight, self.variance_epsilon)


def _mlp_forward(self, x):
    weights = (self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight)
    if not _on_device(x, *weights) or any(w.dtype != x.dtype for w in weights):
        return _original(self)(x)
    return swiglu_mlp(x, *weights)


def _attention_forward(self, hidden_states, position_embeddings=None, attention_mask=None,
                       cache=None, **kwargs):
    cache = kwargs.pop("past_key_values", cache)  # the name before transformers 5.40
    dropout = self.attention_dropout if self.training else 0.0
    if attention_mask is not None or dropout or self.head_dim > 128 \
            or not _on_device(hidden_states):
        return _original(self)(hidden_states, position_embeddings, attention_mask, cache=cache,
                               **kwargs)
    hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
    q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    cos, sin = position_embeddings
    q, k = rope(q, k, cos.to(q.dtype), sin.to(q.dtype))
    if cache is not None:
        k, v = cache.update(k, v, self.layer_idx, kwargs=kwargs)
    # No mask from Hugging Face means: causal with equal lengths, or one query seeing all keys.
    out = attention(q, k, v, causal=q.shape[2] > 1, scale=self.scaling)
    out = out.transpose(1, 2).reshape(*hidden_states.shape[:-1], -1).contiguous()
    return self.o_proj(out), None


def _router_forward(self, hidden_states):
    if not _on_device(hidden_states, self.weight) or hidden_states.dtype != self.weight.dtype:
        return _original(self)(hidden_states)
    return router_topk(hidden_states.reshape(-1, self.hidden_dim), self.weight, self.top_k)


def causal_lm_loss(logits, labels, vocab_size, num_items_in_batch=None, ignore_index=-100,
                   shift_labels=None, **kwargs):
    """transformers' ForCausalLMLoss with the library's cross_entropy (which computes in float32
    from logits of any float dtype, as Hugging Face's upcast does)."""
    if shift_labels is None:
        labels = F.pad(labels, (0, 1), value=ignore_index)
        shift_labels = labels[..., 1:].contiguous()
    logits = logits.reshape(-1, vocab_size)
    shift_labels = shift_labels.reshape(-1).to(logits.device)
    if not _on_device(logits):
        from transformers.loss.loss_utils import fixed_cross_entropy
        return fixed_cross_entropy(logits.float(), shift_labels, num_items_in_batch,
                                   ignore_index, **kwargs)
    if num_items_in_batch is None:
        return cross_entropy(logits, shift_labels, ignore_index=ignore_index)
    loss = cross_entropy(logits, shift_labels, ignore_index=ignore_index, reduction="sum")
    if torch.is_tensor(num_items_in_batch):
        num_items_in_batch = num_items_in_batch.to(loss.device)
    return loss / num_items_in_batch


# ---- matching --------------------------------------------------------------------------------------

def _is_swiglu_mlp(module) -> bool:
    config = getattr(module, "config", None)
    projections = [getattr(module, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
    return (getattr(config, "hidden_act", None) in ("silu", "swish")
            and all(isinstance(p, torch.nn.Linear) and p.bias is None for p in projections))


SWAPS = (
    ("rms_norm", lambda name, m: name in {f"{f}RMSNorm" for f in FAMILIES}, _rms_norm_forward),
    ("attention", lambda name, m: name in {f"{f}Attention" for f in FAMILIES},
     _attention_forward),
    ("swiglu_mlp", lambda name, m: name in {f"{f}MLP" for f in FAMILIES} and _is_swiglu_mlp(m),
     _mlp_forward),
    ("router_topk", lambda name, m: name == "MixtralTopKRouter", _router_forward),
)


def apply(model: torch.nn.Module) -> dict[str, int]:
    """Swaps the library's ops into `model` (in place; applying twice changes nothing more) and
    returns how many modules each op took over (attention counts rope too)."""
    counts = {kind: 0 for kind, _, _ in SWAPS}
    counts["cross_entropy"] = 0
    for module in model.modules():
        name = type(module).__name__
        for kind, matches, forward in SWAPS:
            if matches(name, module):
                if getattr(module.forward, "__func__", None) is not forward:
                    module.forward = types.MethodType(forward, module)
                counts[kind] += 1
        if name.endswith("ForCausalLM") and hasattr(module, "loss_function") \
                and name.startswith(FAMILIES):
            module.loss_function = causal_lm_loss
            counts["cross_entropy"] += 1
    return counts
