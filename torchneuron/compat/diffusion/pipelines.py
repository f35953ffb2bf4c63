"""Diffusers pipelines end to end with tiny components built offline (no hub): DDPM (pixel-space
UNet), Stable Diffusion (latent text-to-image: tiny CLIP text encoder behind a word-level
tokenizer made here, conditional UNet, VAE) and DiT (a transformer denoiser over VAE latents).
Each is built on the CPU from a seed, moved to the device, and run with a CPU generator, so the
starting noise is the same on both; the images (numpy) must match the CPU's within tolerance."""

from __future__ import annotations

import torch

from ..staged import Case
from .models import _dit, _unet2d, _unet2d_condition, _vae

STEPS = 3
IMAGE_TOLERANCE = (1e-4, 1e-4)  # three denoising steps compound rounding


def _generator():
    return torch.Generator().manual_seed(0)


def tiny_tokenizer(max_length: int = 16):
    """A word-level fast tokenizer over a few dozen words, built in memory."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ("a photo of an astronaut riding horse on mars cat dog red blue painting the "
             "in style sunset mountain").split()
    vocab = {"[UNK]": 0, "[PAD]": 1, "[BOS]": 2, "[EOS]": 3, **{w: i + 4 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   bos_token="[BOS]", eos_token="[EOS]", model_max_length=max_length)


def _tiny_clip_text():
    from transformers import CLIPTextConfig, CLIPTextModel

    return CLIPTextModel(CLIPTextConfig(vocab_size=64, hidden_size=32, intermediate_size=37,
                                        num_attention_heads=4, num_hidden_layers=2,
                                        max_position_embeddings=16, pad_token_id=1,
                                        bos_token_id=2, eos_token_id=3, projection_dim=32))


def _ddpm(device: str):
    from diffusers import DDPMPipeline, DDPMScheduler

    pipe = DDPMPipeline(unet=_unet2d(), scheduler=DDPMScheduler(num_train_timesteps=100)).to(device)
    pipe.set_progress_bar_config(disable=True)
    yield "images", pipe(batch_size=1, num_inference_steps=STEPS, generator=_generator(),
                         output_type="np").images


def _stable_diffusion(device: str):
    from diffusers import DDIMScheduler, StableDiffusionPipeline

    pipe = StableDiffusionPipeline(
        vae=_vae(), text_encoder=_tiny_clip_text(), tokenizer=tiny_tokenizer(),
        unet=_unet2d_condition(), scheduler=DDIMScheduler(num_train_timesteps=100),
        safety_checker=None, feature_extractor=None, requires_safety_checker=False).to(device)
    pipe.set_progress_bar_config(disable=True)
    yield "images", pipe("a photo of an astronaut riding a horse on mars", height=32, width=32,
                         num_inference_steps=STEPS, guidance_scale=5.0, generator=_generator(),
                         output_type="np").images


def _dit_pipeline(device: str):
    from diffusers import DDIMScheduler, DiTPipeline

    pipe = DiTPipeline(transformer=_dit(), vae=_vae(),
                       scheduler=DDIMScheduler(num_train_timesteps=100)).to(device)
    pipe.set_progress_bar_config(disable=True)
    yield "images", pipe(class_labels=[1], num_inference_steps=STEPS, guidance_scale=4.0,
                         generator=_generator(), output_type="np").images


def cases() -> list[Case]:
    tol = {"images": IMAGE_TOLERANCE}
    return [Case("DDPMPipeline", "pipeline", _ddpm, ("images",), tol),
            Case("StableDiffusionPipeline", "pipeline", _stable_diffusion, ("images",), tol),
            Case("DiTPipeline", "pipeline", _dit_pipeline, ("images",), tol)]
