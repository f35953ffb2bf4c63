"""torchneuron/ecosystem/transformers_serve.py, fast: the corrections are in place once transformers'
serving modules are imported; the app's shutdown stops the generation managers before the models
are unloaded (the continuous-batching thread kept Ctrl-C from ever ending the process); bad
max_tokens and prompts that fill the context are refused with 400 and vLLM's words; an answer is
capped to the room the context leaves. The servers themselves, on neuron and against Hugging Face
on the CPU: tests/serving/test_transformers_serve.py."""

from __future__ import annotations

import asyncio
import types

import pytest
import torch

pytest.importorskip("fastapi")
serving_utils = pytest.importorskip("transformers.cli.serving.utils")
serving_server = pytest.importorskip("transformers.cli.serving.server")

from fastapi import HTTPException  # noqa: E402
from transformers import GenerationConfig  # noqa: E402

from torchneuron.ecosystem import transformers_serve as ts  # noqa: E402


def test_the_corrections_are_in_place_after_import():
    assert serving_utils.BaseHandler._validate_request._torchneuron
    assert serving_server.build_server._torchneuron
    for manager in (serving_utils.GenerateManager, serving_utils.CBGenerateManager):
        for name in ("generate_streaming", "generate_non_streaming"):
            assert getattr(manager, name).__wrapped__ is not None
    # Applying them again changes nothing (the hook runs once per import, tests may call it).
    validate = serving_utils.BaseHandler._validate_request
    ts.fix_validation(serving_utils)
    assert serving_utils.BaseHandler._validate_request is validate


@pytest.mark.parametrize("field, value, words", [
    ("max_tokens", -1, "max_tokens must be at least 1, got -1."),
    ("max_tokens", 0, "max_tokens must be at least 1, got 0."),
    ("max_completion_tokens", -5, "max_completion_tokens must be at least 1, got -5."),
    ("max_output_tokens", 0, "max_output_tokens must be at least 1, got 0."),
    ("max_tokens", "12", "max_tokens must be an integer, got '12'."),
    ("max_tokens", True, "max_tokens must be an integer, got True."),
])
def test_bad_max_tokens_is_a_400_with_vllms_words(field, value, words):
    with pytest.raises(HTTPException) as refused:
        ts.check_max_tokens({"prompt": "Hello", field: value})
    assert refused.value.status_code == 400 and refused.value.detail == words


def test_good_or_absent_max_tokens_pass():
    ts.check_max_tokens({"max_tokens": 1, "max_completion_tokens": None})
    ts.check_max_tokens({})


def model_with_context(length):
    return types.SimpleNamespace(config=types.SimpleNamespace(max_position_embeddings=length))


@pytest.mark.parametrize("ids", [list(range(512)), list(range(600)),
                                 torch.zeros(1, 512, dtype=torch.long)])
def test_a_prompt_that_fills_the_context_is_a_400(ids):
    config = GenerationConfig(max_new_tokens=12)
    with pytest.raises(HTTPException, match="maximum context length is 512 tokens") as refused:
        ts.fit_to_context(model_with_context(512), {"input_ids": ids}, config)
    assert refused.value.status_code == 400
    assert f"your prompt contains {len(ids) if isinstance(ids, list) else 512}" in \
        refused.value.detail


@pytest.mark.parametrize("prompt, asked, capped", [(500, 50, 12), (500, 12, 12), (10, 5, 5),
                                                  (10, None, 502)])
def test_an_answer_is_capped_to_the_room_the_context_leaves(prompt, asked, capped):
    config = GenerationConfig()
    config.max_new_tokens = asked
    ts.fit_to_context(model_with_context(512), {"input_ids": list(range(prompt))}, config)
    assert config.max_new_tokens == capped


def test_a_model_without_a_context_length_is_left_alone():
    config = GenerationConfig(max_new_tokens=4096)
    ts.fit_to_context(types.SimpleNamespace(config=types.SimpleNamespace()),
                      {"input_ids": list(range(10_000))}, config)
    assert config.max_new_tokens == 4096


def test_the_app_shutdown_stops_generation_before_unloading_models():
    order = []
    manager = types.SimpleNamespace(shutdown=lambda: order.append("models unloaded"))
    state = types.SimpleNamespace(shutdown=lambda: order.append("generation stopped"),
                                  is_cb_alive=lambda: True)
    handler = types.SimpleNamespace()
    app = serving_server.build_server(manager, handler, completion_handler=handler,
                                      response_handler=handler, transcription_handler=handler,
                                      systemone_handler=handler, generation_state=state)

    async def serve_then_stop():
        async with app.router.lifespan_context(app):
            order.append("serving")

    asyncio.run(serve_then_stop())
    assert order == ["serving", "generation stopped", "models unloaded"]


def test_a_refusal_is_answered_with_vllms_error_body():
    import json

    handler = types.SimpleNamespace()
    state = types.SimpleNamespace(shutdown=lambda: None, is_cb_alive=lambda: True)
    app = serving_server.build_server(types.SimpleNamespace(shutdown=lambda: None), handler,
                                      completion_handler=handler, response_handler=handler,
                                      transcription_handler=handler, systemone_handler=handler,
                                      generation_state=state)
    with pytest.raises(HTTPException) as refused:
        ts.check_max_tokens({"max_tokens": -1})
    answer = asyncio.run(app.exception_handlers[type(refused.value)](None, refused.value))
    assert answer.status_code == 400
    assert json.loads(answer.body) == {"error": {
        "message": "max_tokens must be at least 1, got -1.", "type": "BadRequestError",
        "param": "max_tokens", "code": 400}}
