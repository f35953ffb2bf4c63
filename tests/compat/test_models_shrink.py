"""The model battery's config shrinking turns every source of randomness in forward off: the
neuron generator's stream is not the CPU's (as CUDA's is not), so a dropout left on would make
neuron's training step differ from the CPU's for a reason that is not a bug."""

import torch
from transformers import GPT2Config

from torchneuron.compat.models.shrink import shrink_dict


def test_every_dropout_spelling_is_zeroed():
    names = ["hidden_dropout_prob", "attention_dropout", "resid_pdrop", "embd_pdrop",
             "attn_pdrop", "drop_path_rate", "layerdrop", "layer_drop", "drop_rate",
             "drop_connect_rate", "attn_drop_rate", "fusion_droppath", "noise_scale"]
    shrunk = shrink_dict({name: 0.1 for name in names})
    assert {name: shrunk[name] for name in names} == {name: 0.0 for name in names}
    assert shrink_dict({"initializer_range": 0.02})["initializer_range"] == 0.02


def test_shrunk_gpt2_trains_like_the_cpu():
    from transformers import GPT2LMHeadModel

    config = GPT2Config(**shrink_dict(GPT2Config().to_dict()))
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).train()
    ids = torch.randint(0, config.vocab_size, (2, 8))
    expected = model(input_ids=ids, labels=ids).loss
    got = model.neuron()(input_ids=ids.neuron(), labels=ids.neuron()).loss
    torch.testing.assert_close(got.cpu(), expected)
