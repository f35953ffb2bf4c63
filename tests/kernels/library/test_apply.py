"""apply(model) on tiny Hugging Face Llama, Qwen2 and Mixtral models built from transformers'
config classes: on neuron, in both kernel modes, the applied model's logits, loss and gradients
equal the untouched model's on the CPU; torch.compile of an applied model keeps the library's ops
in one graph (no graph break at them)."""

import copy

import pytest
import torch
from transformers import (LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)

from torchneuron.kernels import apply

COMMON = dict(vocab_size=96, hidden_size=64, intermediate_size=80, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              attn_implementation="sdpa")

MODELS = {
    "llama": lambda: LlamaForCausalLM(LlamaConfig(**COMMON)),
    "qwen2": lambda: Qwen2ForCausalLM(Qwen2Config(**COMMON)),
    "mixtral": lambda: MixtralForCausalLM(MixtralConfig(**COMMON, num_local_experts=4,
                                                        num_experts_per_tok=2)),
}
EXPECTED = {
    "llama": dict(rms_norm=5, attention=2, swiglu_mlp=2, router_topk=0, cross_entropy=1),
    "qwen2": dict(rms_norm=5, attention=2, swiglu_mlp=2, router_topk=0, cross_entropy=1),
    "mixtral": dict(rms_norm=5, attention=2, swiglu_mlp=0, router_topk=2, cross_entropy=1),
}


def _batch():
    ids = torch.randint(0, 96, (2, 12))
    labels = ids.clone()
    labels[0, :3] = -100
    return ids, labels


def _pair(family, device="neuron", bfloat16=False):
    """(the untouched model on the CPU, an applied copy on `device`)."""
    torch.manual_seed(0)
    reference = MODELS[family]()
    if bfloat16:
        reference = reference.bfloat16()
    model = copy.deepcopy(reference).to(device)
    counts = apply(model)
    assert counts == EXPECTED[family]
    return reference, model


def _run(model, ids, labels):
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    return out.logits, out.loss, grads


@pytest.mark.parametrize("family", sorted(MODELS))
def test_applied_model_equals_the_untouched_model(mode, family):
    reference, model = _pair(family)
    ids, labels = _batch()
    logits, loss, grads = _run(reference, ids, labels)
    n_logits, n_loss, n_grads = _run(model, ids.to("neuron"), labels.to("neuron"))
    torch.testing.assert_close(n_logits.cpu(), logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(n_loss.cpu(), loss, atol=1e-5, rtol=1e-5)
    assert n_grads.keys() == grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(n_grads[name].cpu(), grad, atol=1e-4, rtol=1e-3, msg=name)


def test_bfloat16_llama(mode):
    reference, model = _pair("llama", bfloat16=True)
    ids, labels = _batch()
    logits, loss, _ = _run(reference, ids, labels)
    n_logits, n_loss, _ = _run(model, ids.to("neuron"), labels.to("neuron"))
    torch.testing.assert_close(n_logits.cpu(), logits, atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(n_loss.cpu(), loss, atol=2e-2, rtol=2e-2)


def test_state_dict_and_parameters_are_untouched():
    model = MODELS["llama"]()
    keys, params = list(model.state_dict()), list(model.parameters())
    apply(model)
    assert list(model.state_dict()) == keys
    assert all(a is b for a, b in zip(model.parameters(), params))
    assert apply(model) == EXPECTED["llama"]  # applying twice changes nothing more


def test_applied_model_still_runs_on_the_cpu():
    reference, model = _pair("qwen2", device="cpu")
    ids, labels = _batch()
    torch.testing.assert_close(model(input_ids=ids, labels=labels).loss,
                               reference(input_ids=ids, labels=labels).loss)


def test_a_padding_mask_falls_back_to_hugging_face_attention():
    reference, model = _pair("llama")
    ids = torch.randint(0, 96, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, :3] = 0
    expected = reference(input_ids=ids, attention_mask=mask).logits
    actual = model(input_ids=ids.to("neuron"), attention_mask=mask.to("neuron")).logits
    torch.testing.assert_close(actual.cpu(), expected, atol=1e-4, rtol=1e-4)


def test_generate_with_a_cache_gives_the_same_tokens():
    reference, model = _pair("llama")
    ids = torch.randint(0, 96, (1, 5))
    expected = reference.generate(ids, max_new_tokens=6, do_sample=False)
    actual = model.generate(ids.to("neuron"), max_new_tokens=6, do_sample=False)
    assert torch.equal(actual.cpu(), expected)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_torch_compile_has_no_graph_break_at_the_ops(family):
    reference, model = _pair(family)
    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(model, backend=counting_backend, fullgraph=True)
    ids, labels = _batch()
    out = compiled(input_ids=ids.to("neuron"), labels=labels.to("neuron"))
    assert len(graphs) == 1
    targets = {str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"}
    for op in ("rms_norm", "rope", "attention", "swiglu_mlp", "cross_entropy"):
        assert f"neuron_kernels.{op}.default" in targets, op
    expected = reference(input_ids=ids, labels=labels)
    torch.testing.assert_close(out.logits.cpu(), expected.logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(out.loss.cpu(), expected.loss, atol=1e-5, rtol=1e-5)
