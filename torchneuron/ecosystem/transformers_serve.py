"""`transformers serve` (transformers' own OpenAI-compatible server, in the main environment):
a clean Ctrl-C, and bad requests refused with 400 as vLLM refuses them. Neither is specific to
neuron (both hold with `--device cpu`), but serving on neuron goes through them.

- Ctrl-C: uvicorn stops, and the app's shutdown unloads the models, but nothing stops the
  continuous-batching manager, whose generation thread (`ContinuousBatchingManager.start`,
  a non-daemon `threading.Thread`) loops until told to stop; the interpreter then waits for it
  forever. `Serve.kill_server()` stops it, the command's Ctrl-C path (`uvicorn.Server.run`)
  never calls that. The app's shutdown now stops the generation managers first.
- `max_tokens` (`max_completion_tokens`, `max_output_tokens`) below 1: refused, with vLLM's
  words ("max_tokens must be at least 1, got -1."), where transformers generated anyway.
- A prompt as long as the model's context (`max_position_embeddings`) or longer: refused, with
  vLLM's words ("This model's maximum context length is ..."); a shorter prompt's answer is
  capped to the room left in the context, as vLLM caps `max_tokens`, where transformers ran
  past the positions the model knows."""

from __future__ import annotations

import contextlib
import functools
import inspect

_MAX_TOKEN_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


@functools.cache
def bad_request_type() -> type:
    """A 400 whose body is vLLM's (`{"error": {"message", "type", "param", "code"}}`, where the
    `openai` client reads its message) in the app fix_shutdown builds, FastAPI's plain
    `{"detail": ...}` 400 elsewhere. Made at first use: fastapi is transformers' serving extra,
    which torchneuron does not need."""
    from fastapi import HTTPException

    class BadRequest(HTTPException):
        def __init__(self, message: str, param: str):
            super().__init__(status_code=400, detail=message)
            self.param = param

    return BadRequest


def _bad_request(message: str, param: str) -> Exception:
    return bad_request_type()(message, param)


async def _as_vllm_answers(request, error):
    from fastapi.responses import JSONResponse
    return JSONResponse({"error": {"message": error.detail, "type": "BadRequestError",
                                   "param": error.param, "code": 400}}, status_code=400)


def context_length(model) -> int | None:
    """The model's context in tokens, as vLLM derives its default max_model_len."""
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "get_text_config"):
        config = config.get_text_config()
    length = getattr(config, "max_position_embeddings", None)
    return length if isinstance(length, int) and length > 0 else None


def check_max_tokens(body: dict) -> None:
    for field in _MAX_TOKEN_FIELDS:
        value = body.get(field)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad_request(f"{field} must be an integer, got {value!r}.", field)
        if value < 1:
            raise _bad_request(f"{field} must be at least 1, got {value}.", field)


def fit_to_context(model, inputs, gen_config) -> None:
    """Refuses a prompt that fills the model's context; caps the answer to the room left."""
    limit = context_length(model)
    if limit is None:
        return
    input_ids = inputs["input_ids"]
    length = len(input_ids) if isinstance(input_ids, list) else int(input_ids.shape[-1])
    if length >= limit:
        raise _bad_request(
            f"This model's maximum context length is {limit} tokens. However, your prompt "
            f"contains {length} input tokens, which leaves no room for any output token. "
            "Please reduce the length of the input prompt.", "input_tokens")
    room = limit - length
    if gen_config.max_new_tokens is None or gen_config.max_new_tokens > room:
        gen_config.max_new_tokens = room


def fix_validation(utils) -> None:
    """Wraps the request check and the generate calls of transformers.cli.serving.utils."""
    # internal: see runtime/torch_internals.py "transformers.cli.serving (serve's handlers)"
    validate = utils.BaseHandler._validate_request
    if getattr(validate, "_torchneuron", False):
        return

    @functools.wraps(validate)
    def _validate_request(self, body):
        validate(self, body)
        check_max_tokens(body)

    _validate_request._torchneuron = True
    utils.BaseHandler._validate_request = _validate_request

    for manager in (utils.GenerateManager, utils.CBGenerateManager):
        for name in ("generate_streaming", "generate_non_streaming"):
            setattr(manager, name, _fitting(getattr(manager, name)))


def _fitting(generate):
    signature = inspect.signature(generate)
    if inspect.iscoroutinefunction(generate):
        @functools.wraps(generate)
        async def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            fit_to_context(bound.arguments["model"], bound.arguments["inputs"],
                           bound.arguments["gen_config"])
            return await generate(*args, **kwargs)
    else:
        @functools.wraps(generate)
        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            fit_to_context(bound.arguments["model"], bound.arguments["inputs"],
                           bound.arguments["gen_config"])
            return generate(*args, **kwargs)
    return wrapper


def fix_shutdown(server) -> None:
    """Wraps build_server of transformers.cli.serving.server: the app's shutdown stops the
    generation managers (the continuous-batching thread) before the models are unloaded."""
    # internal: see runtime/torch_internals.py "transformers.cli.serving (serve's handlers)"
    build = server.build_server
    if getattr(build, "_torchneuron", False):
        return
    signature = inspect.signature(build)

    @functools.wraps(build)
    def build_server(*args, **kwargs):
        app = build(*args, **kwargs)
        app.add_exception_handler(bad_request_type(), _as_vllm_answers)
        state = signature.bind(*args, **kwargs).arguments.get("generation_state")
        if state is None:
            return app
        lifespan = app.router.lifespan_context

        @contextlib.asynccontextmanager
        async def stopping_generation(app):
            async with lifespan(app) as value:
                try:
                    yield value
                finally:
                    state.shutdown()

        app.router.lifespan_context = stopping_generation
        return app

    build_server._torchneuron = True
    server.build_server = build_server
