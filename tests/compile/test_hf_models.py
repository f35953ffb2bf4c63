"""Ten Hugging Face architectures, built tiny from their configs, compiled on neuron: logits,
loss and every gradient equal eager neuron's. Slow (each is a forward and a backward compile)."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

TEXT = dict(vocab_size=128, max_position_embeddings=64)
DECODER = dict(TEXT, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=64)

# name -> (model class, config class, config kwargs)
ARCHITECTURES = {
    "gpt2": ("GPT2LMHeadModel", "GPT2Config",
             dict(vocab_size=128, n_positions=64, n_embd=32, n_layer=2, n_head=4)),
    "llama": ("LlamaForCausalLM", "LlamaConfig", dict(DECODER, num_key_value_heads=2)),
    "mistral": ("MistralForCausalLM", "MistralConfig",
                dict(DECODER, num_key_value_heads=2, sliding_window=4)),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", dict(DECODER, num_key_value_heads=2)),
    "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", DECODER),
    "opt": ("OPTForCausalLM", "OPTConfig",
            dict(TEXT, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, ffn_dim=64,
                 word_embed_proj_dim=32)),
    "bert": ("BertForMaskedLM", "BertConfig", DECODER),
    "distilbert": ("DistilBertForMaskedLM", "DistilBertConfig",
                   dict(TEXT, dim=32, n_layers=2, n_heads=4, hidden_dim=64)),
    "t5": ("T5ForConditionalGeneration", "T5Config",
           dict(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                decoder_start_token_id=0)),
    "vit": ("ViTForImageClassification", "ViTConfig",
            dict(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                 num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 num_labels=5)),
}


def build(name):
    model_cls, config_cls, kwargs = ARCHITECTURES[name]
    config = getattr(transformers, config_cls)(**kwargs)
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(config).eval()  # eval: no dropout to disagree on
    gen = torch.Generator().manual_seed(1)
    if name == "vit":
        inputs = {"pixel_values": torch.randn(2, 3, 16, 16, generator=gen),
                  "labels": torch.randint(0, 5, (2,), generator=gen)}
    else:
        ids = torch.randint(1, 128, (2, 8), generator=gen)
        inputs = {"input_ids": ids, "labels": ids}
    return model, inputs


def loss_logits_grads(model, inputs, run=None):
    out = (model if run is None else run)(**{k: v.neuron() for k, v in inputs.items()})
    out.loss.backward()
    grads = {n: p.grad.cpu() for n, p in model.named_parameters() if p.grad is not None}
    return out.loss.detach().cpu(), out.logits.detach().cpu(), grads


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_compiled_model_matches_eager(name):
    model, inputs = build(name)
    eager = model.neuron()
    compiled_model, _ = build(name)
    compiled_model = compiled_model.neuron()
    compiled = torch.compile(compiled_model, backend="neuron")

    loss_e, logits_e, grads_e = loss_logits_grads(eager, inputs)
    loss_c, logits_c, grads_c = loss_logits_grads(compiled_model, inputs, run=compiled)

    # Fused kernels sum in another order than eager's: float32 round-off, well below 1e-4.
    tol = dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(logits_c, logits_e, **tol)
    torch.testing.assert_close(loss_c, loss_e, **tol)
    assert grads_c.keys() == grads_e.keys() and grads_e
    for param in grads_e:
        torch.testing.assert_close(grads_c[param], grads_e[param], **tol, msg=param)
