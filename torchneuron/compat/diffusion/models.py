"""Diffusers model classes built small from their configs (the sizes of diffusers' own dummy test
components), each through forward and one training step (loss and every gradient) against the
CPU. Inputs are the denoiser's call: a noisy latent or image, a timestep, and the conditioning
its config asks for (text states of `cross_attention_dim`, class labels, pooled projections)."""

from __future__ import annotations

import torch

from ..staged import Case

BATCH = 2


def _randn(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


def train_step(model, inputs: dict, output) -> list[tuple[str, torch.Tensor]]:
    """One step of a denoiser's objective (mean squared error against a fixed target), with the
    loss and every parameter's gradient as the result."""
    model.train()
    model.zero_grad(set_to_none=True)
    pred = output(model(**inputs))
    loss = torch.nn.functional.mse_loss(pred.float(), torch.zeros_like(pred, dtype=torch.float32)
                                        + 0.1)
    loss.backward()
    model.eval()
    return [("loss", loss.detach())] + [(n, p.grad) for n, p in model.named_parameters()
                                        if p.grad is not None]


def without_random_drops(model):
    """Label dropout (DiT's class embedding) draws from the device's generator in training, whose
    stream differs between the CPU and neuron (as the CPU's and CUDA's do): set to zero, as the
    model battery zeroes dropout."""
    for module in model.modules():
        if isinstance(getattr(module, "dropout_prob", None), float):
            module.dropout_prob = 0.0
    return model


def model_case(name: str, family: str, build, inputs, output=lambda o: o.sample) -> Case:
    def run(device: str):
        model = without_random_drops(build()).eval()
        args = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs().items()}
        model = model.to(device)
        with torch.no_grad():
            yield "forward", output(model(**args))
        yield "train", train_step(model, args, output)

    return Case(name, family, run, ("forward", "train"))


def _unet2d():
    from diffusers import UNet2DModel

    return UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                       block_out_channels=(16, 32), norm_num_groups=8,
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"))


def _unet2d_condition(**extra):
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                                block_out_channels=(16, 32), norm_num_groups=8,
                                down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
                                cross_attention_dim=32, attention_head_dim=8, **extra)


def _vae():
    from diffusers import AutoencoderKL

    return AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, norm_num_groups=8,
                         block_out_channels=(16, 32), sample_size=32,
                         down_block_types=("DownEncoderBlock2D",) * 2,
                         up_block_types=("UpDecoderBlock2D",) * 2)


def _vq():
    from diffusers import VQModel

    return VQModel(in_channels=3, out_channels=3, latent_channels=3, norm_num_groups=8,
                   block_out_channels=(16, 32), num_vq_embeddings=32,
                   down_block_types=("DownEncoderBlock2D",) * 2,
                   up_block_types=("UpDecoderBlock2D",) * 2)


def _controlnet():
    from diffusers import ControlNetModel

    return ControlNetModel(in_channels=4, layers_per_block=1, block_out_channels=(16, 32),
                           norm_num_groups=8, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                           cross_attention_dim=32, attention_head_dim=8,
                           conditioning_embedding_out_channels=(8, 16))


def _dit():
    from diffusers import DiTTransformer2DModel

    return DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4,
                                 out_channels=8, num_layers=2, sample_size=8, patch_size=2,
                                 num_embeds_ada_norm=1000)  # the pipeline's null class is 1000


def _pixart():
    from diffusers import PixArtTransformer2DModel

    return PixArtTransformer2DModel(sample_size=8, num_layers=2, patch_size=2, attention_head_dim=8,
                                    num_attention_heads=2, caption_channels=32, in_channels=4,
                                    cross_attention_dim=16, out_channels=8)


def _sd3():
    from diffusers import SD3Transformer2DModel

    return SD3Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_layers=2,
                                 attention_head_dim=8, num_attention_heads=2, joint_attention_dim=32,
                                 caption_projection_dim=16, pooled_projection_dim=16, out_channels=4)


def _flux():
    from diffusers import FluxTransformer2DModel

    return FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                  attention_head_dim=16, num_attention_heads=2,
                                  joint_attention_dim=32, pooled_projection_dim=32,
                                  axes_dims_rope=[4, 4, 8])


def _tiny_vae():
    from diffusers import AutoencoderTiny

    return AutoencoderTiny(encoder_block_out_channels=(16, 16), decoder_block_out_channels=(16, 16),
                           num_encoder_blocks=(1, 1), num_decoder_blocks=(1, 1))


def _sana():
    from diffusers import SanaTransformer2DModel

    return SanaTransformer2DModel(in_channels=4, out_channels=4, num_attention_heads=2,
                                  attention_head_dim=8, num_layers=2, num_cross_attention_heads=2,
                                  cross_attention_head_dim=8, cross_attention_dim=16,
                                  caption_channels=32, sample_size=8)


def _wan():
    from diffusers import WanTransformer3DModel

    return WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=8,
                                 in_channels=4, out_channels=4, text_dim=32, freq_dim=32,
                                 ffn_dim=32, num_layers=2, rope_max_seq_len=32)


def _auraflow():
    from diffusers import AuraFlowTransformer2DModel

    return AuraFlowTransformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_mmdit_layers=1,
                                      num_single_dit_layers=1, attention_head_dim=8,
                                      num_attention_heads=2, joint_attention_dim=32,
                                      caption_projection_dim=16, out_channels=4, pos_embed_max_size=64)


def _flux_inputs():
    # Packed latents: 4x4 positions of 4 channels, text of 3 tokens, ids per position (t, h, w).
    h = w = 4
    ids = torch.stack(torch.meshgrid(torch.zeros(1), torch.arange(h).float(), torch.arange(w).float(),
                                     indexing="ij"), -1).reshape(-1, 3).float()
    return {"hidden_states": _randn(1, h * w, 4), "encoder_hidden_states": _randn(1, 3, 32),
            "pooled_projections": _randn(1, 32), "timestep": torch.tensor([0.5]),
            "img_ids": ids, "txt_ids": torch.zeros(3, 3)}


def cases() -> list[Case]:
    t = torch.tensor([10, 500])
    return [
        model_case("UNet2DModel", "unet", _unet2d,
                   lambda: {"sample": _randn(BATCH, 3, 16, 16), "timestep": t}),
        model_case("UNet2DConditionModel", "unet", _unet2d_condition,
                   lambda: {"sample": _randn(BATCH, 4, 16, 16), "timestep": t,
                            "encoder_hidden_states": _randn(BATCH, 7, 32)}),
        model_case("AutoencoderKL", "vae", _vae, lambda: {"sample": _randn(BATCH, 3, 32, 32)}),
        model_case("VQModel", "vae", _vq, lambda: {"sample": _randn(BATCH, 3, 32, 32)}),
        model_case("ControlNetModel", "controlnet", _controlnet,
                   lambda: {"sample": _randn(BATCH, 4, 16, 16), "timestep": t,
                            "encoder_hidden_states": _randn(BATCH, 7, 32),
                            "controlnet_cond": _randn(BATCH, 3, 32, 32)},
                   output=lambda o: o.mid_block_res_sample),
        model_case("DiTTransformer2DModel", "transformer", _dit,
                   lambda: {"hidden_states": _randn(BATCH, 4, 8, 8), "timestep": t,
                            "class_labels": torch.tensor([1, 3])}),
        model_case("PixArtTransformer2DModel", "transformer", _pixart,
                   lambda: {"hidden_states": _randn(BATCH, 4, 8, 8), "timestep": t,
                            "encoder_hidden_states": _randn(BATCH, 5, 32),
                            "added_cond_kwargs": {"resolution": None, "aspect_ratio": None}}),
        model_case("SD3Transformer2DModel", "transformer", _sd3,
                   lambda: {"hidden_states": _randn(BATCH, 4, 8, 8), "timestep": t,
                            "encoder_hidden_states": _randn(BATCH, 5, 32),
                            "pooled_projections": _randn(BATCH, 16)}),
        model_case("FluxTransformer2DModel", "transformer", _flux, _flux_inputs),
        model_case("AutoencoderTiny", "vae", _tiny_vae, lambda: {"sample": _randn(BATCH, 3, 32, 32)}),
        model_case("SanaTransformer2DModel", "transformer", _sana,
                   lambda: {"hidden_states": _randn(BATCH, 4, 8, 8), "timestep": t,
                            "encoder_hidden_states": _randn(BATCH, 5, 32)}),
        model_case("WanTransformer3DModel", "video transformer", _wan,
                   lambda: {"hidden_states": _randn(BATCH, 4, 2, 8, 8), "timestep": t,
                            "encoder_hidden_states": _randn(BATCH, 5, 32)}),
        model_case("AuraFlowTransformer2DModel", "transformer", _auraflow,
                   lambda: {"hidden_states": _randn(BATCH, 4, 8, 8), "timestep": t,
                            "encoder_hidden_states": _randn(BATCH, 5, 32)}),
    ]
