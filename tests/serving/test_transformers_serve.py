"""`transformers serve` on neuron with continuous batching, in the main environment, driven by the
same `openai` client: completions, chat completions, streaming and concurrent requests, each
held to Hugging Face `generate()` on the CPU; bad requests answered 400 as vLLM answers them, and
the server still serving after them. The server is transformers' own (`Serve`, the class behind
the command) in a thread of this process, so that the test can see where its model lives; it
listens on 127.0.0.1 and is stopped at the end of the module, whatever the outcome. The command
itself, `transformers serve`, runs once in a process of its own, to be stopped by Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

for needed in ("fastapi", "uvicorn", "openai"):  # transformers' `serving` extra
    pytest.importorskip(needed)
import openai  # noqa: E402
from serving_common import MAX_TOKENS, PROMPTS  # noqa: E402

from torchneuron.serving.tiny_model import MAX_POSITIONS  # noqa: E402

from torchneuron.serving.server_process import free_port  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def serve(model_dir):
    from transformers.cli.serve import Serve

    port = free_port()
    # The KV cache is given in blocks: by default transformers sizes it as a share of the
    # device's free memory (24 GiB here), which the host behind the software device cannot back.
    server = Serve(str(model_dir), continuous_batching=True, device="neuron", dtype="float32",
                   cb_block_size=32, cb_num_blocks=128, host="127.0.0.1", port=port,
                   non_blocking=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    break
            except OSError:
                assert time.monotonic() < deadline, "transformers serve did not come up"
                time.sleep(0.5)
        server.base_url = f"http://127.0.0.1:{port}/v1"
        yield server
    finally:
        server.kill_server()


@pytest.fixture(scope="module")
def client(serve):
    return openai.OpenAI(base_url=serve.base_url, api_key="unused", timeout=120)


def expected_text(tokenizer, tokens: list[int]) -> tuple[str, str]:
    """The text and finish reason of a greedy answer that stops at the end-of-sequence token."""
    if tokenizer.eos_token_id in tokens:
        return tokenizer.decode(tokens[:tokens.index(tokenizer.eos_token_id)]), "stop"
    return tokenizer.decode(tokens), "length"


def test_model_is_on_neuron_and_batches_continuously(serve, client, model_dir):
    client.completions.create(model=str(model_dir), prompt=PROMPTS[0], max_tokens=2,
                              temperature=0)
    (timed,) = serve._model_manager.loaded_models.values()
    assert {p.device.type for p in timed.model.parameters()} == {"neuron"}
    state = serve._generation_state
    assert state._cb_manager is not None and state.is_cb_alive()
    assert not state._generate_managers, "a request took the sequential generate() path"


def test_completions_match_hf_on_cpu(client, model_dir, tokenizer, hf_greedy):
    for prompt in PROMPTS:
        answer = client.completions.create(model=str(model_dir), prompt=prompt,
                                           max_tokens=MAX_TOKENS, temperature=0)
        text, reason = expected_text(tokenizer, hf_greedy(tokenizer(prompt).input_ids))
        assert (answer.choices[0].text, answer.choices[0].finish_reason) == (text, reason)


def test_chat_and_streaming_match_hf_on_cpu(client, model_dir, tokenizer, hf_greedy):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    template = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                             tokenize=False)
    text, _ = expected_text(tokenizer, hf_greedy(tokenizer(template,
                                                           add_special_tokens=False).input_ids))
    answer = client.chat.completions.create(model=str(model_dir), messages=messages,
                                            max_tokens=MAX_TOKENS, temperature=0)
    assert answer.choices[0].message.content == text
    pieces = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=str(model_dir), messages=messages, max_tokens=MAX_TOKENS, temperature=0,
        stream=True) if c.choices]
    assert len([p for p in pieces if p]) > 1
    assert "".join(pieces) == text


def test_concurrent_requests_complete_and_match(serve, model_dir, tokenizer, hf_greedy):
    prompts = [f"{PROMPTS[i % len(PROMPTS)]} {i}" for i in range(16)]

    async def ask_all():
        client = openai.AsyncOpenAI(base_url=serve.base_url, api_key="unused", timeout=300)
        async with client:
            return await asyncio.gather(*(
                client.completions.create(model=str(model_dir), prompt=p,
                                          max_tokens=MAX_TOKENS, temperature=0)
                for p in prompts))

    for prompt, answer in zip(prompts, asyncio.run(ask_all())):
        text, reason = expected_text(tokenizer, hf_greedy(tokenizer(prompt).input_ids))
        assert (answer.choices[0].text, answer.choices[0].finish_reason) == (text, reason)


def test_bad_requests_get_400_as_vllm_gives_them(client, model_dir, tokenizer, hf_greedy):
    model = str(model_dir)
    for ask in (dict(max_tokens=-1), dict(max_tokens=0)):
        with pytest.raises(openai.BadRequestError, match="max_tokens must be at least 1"):
            client.completions.create(model=model, prompt=PROMPTS[0], temperature=0, **ask)
    messages = [{"role": "user", "content": "Hello"}]
    with pytest.raises(openai.BadRequestError, match="max_completion_tokens must be at least 1"):
        client.chat.completions.create(model=model, messages=messages, max_completion_tokens=-3)
    with pytest.raises(openai.BadRequestError, match="max_tokens must be at least 1"):
        client.chat.completions.create(model=model, messages=messages, max_tokens=-1,
                                       stream=True)
    context = MAX_POSITIONS
    too_long = " ".join(["word"] * (2 * context))
    assert len(tokenizer(too_long).input_ids) > context
    with pytest.raises(openai.BadRequestError, match=f"maximum context length is {context}"):
        client.completions.create(model=model, prompt=too_long, max_tokens=4, temperature=0)
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.chat.completions.create(model=model, max_tokens=4, stream=True,
                                       messages=[{"role": "user", "content": too_long}])
    # The server goes on serving, with Hugging Face's answer.
    answer = client.completions.create(model=model, prompt=PROMPTS[1], max_tokens=MAX_TOKENS,
                                       temperature=0)
    text, reason = expected_text(tokenizer, hf_greedy(tokenizer(PROMPTS[1]).input_ids))
    assert (answer.choices[0].text, answer.choices[0].finish_reason) == (text, reason)


def test_an_answer_stops_where_the_context_ends(client, model_dir, tokenizer, hf_greedy):
    """As vLLM caps max_tokens: a prompt 6 tokens short of the context gets 6 tokens at most."""
    ids = tokenizer(" ".join(["word"] * MAX_POSITIONS)).input_ids[:MAX_POSITIONS - 6]
    prompt = tokenizer.decode(ids[1:])  # without <s>, which the tokenizer adds again
    assert tokenizer(prompt).input_ids == ids
    answer = client.completions.create(model=str(model_dir), prompt=prompt, max_tokens=50,
                                       temperature=0)
    text, reason = expected_text(tokenizer, hf_greedy(ids, 6))
    assert (answer.choices[0].text, answer.choices[0].finish_reason) == (text, reason)
    assert answer.usage.completion_tokens <= 6


def test_ctrl_c_stops_transformers_serve(model_dir, tmp_path):
    """The command, after continuous batching has started its generation thread: SIGINT (what
    Ctrl-C sends) ends the process, where it used to wait for that thread forever."""
    port = free_port()
    repo = pathlib.Path(__file__).resolve().parents[2]
    command = [str(pathlib.Path(sys.executable).with_name("transformers")), "serve",
               str(model_dir), "--device", "neuron", "--dtype", "float32",
               "--continuous-batching", "--cb-block-size", "32", "--cb-num-blocks", "64",
               "--host", "127.0.0.1", "--port", str(port)]
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        # This checkout's torchneuron, as the test process has it (the command's own sys.path
        # starts at the environment's bin/).
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True,
                                   env={**os.environ, "PYTHONPATH": str(repo)})
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "transformers serve did not come up"
            try:
                with urllib.request.urlopen(base + "/health", timeout=5):
                    break
            except OSError:
                time.sleep(0.5)
        body = json.dumps({"model": str(model_dir), "prompt": "Hello", "max_tokens": 4,
                           "temperature": 0}).encode()
        request = urllib.request.Request(base + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            assert json.loads(answer.read())["usage"]["completion_tokens"] == 4
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("transformers serve still running 60 s after Ctrl-C:\n"
                        + log.read_text()[-3000:])
        # 0, or 1 where click reports the interrupt uvicorn re-raises once it has stopped
        # ("Aborted!"), as any click command stopped by Ctrl-C.
        assert code in (0, 1) and "Finished server process" in log.read_text(), \
            log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
