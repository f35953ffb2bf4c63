"""`vllm serve` on neuron, driven by the real `openai` client: completions, chat completions,
streaming, 64 concurrent requests through continuous batching, and a too-long prompt. Every
answer is held to Hugging Face `generate()` on the CPU. The server runs on 127.0.0.1 for this
module and is stopped at its end, whatever the outcome."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("vllm")
openai = pytest.importorskip("openai")

from serving_common import MAX_MODEL_LEN, MAX_TOKENS, PROMPTS  # noqa: E402

from torchneuron.serving.server_process import free_port, server, vllm_serve_command  # noqa: E402

pytestmark = pytest.mark.slow

MODEL = "tiny"
MAX_NUM_SEQS = 16  # fewer than the 64 concurrent requests: the rest queue and join as others end


@pytest.fixture(scope="module")
def base_url(model_dir, tmp_path_factory):
    port = free_port()
    command = vllm_serve_command(
        model_dir, port, "--served-model-name", MODEL, "--dtype", "float32",
        "--max-model-len", str(MAX_MODEL_LEN), "--seed", "0", "--max-num-seqs", str(MAX_NUM_SEQS),
        "--max-num-batched-tokens", "64", "--kv-cache-memory-bytes", str(32 << 20),
        "--enforce-eager")
    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    with server(command, port, log) as url:
        yield url + "/v1"


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=base_url, api_key="unused", timeout=120)


def token_ids(logprobs_tokens: list[str]) -> list[int]:
    """Tokens reported as 'token_id:<id>' (return_tokens_as_token_ids) back to ids."""
    return [int(t.removeprefix("token_id:")) for t in logprobs_tokens]


GREEDY = dict(temperature=0, max_tokens=MAX_TOKENS)
AS_IDS = {"ignore_eos": True, "return_token_ids": True, "return_tokens_as_token_ids": True}


def test_the_server_runs_on_neuron(client):
    assert [m.id for m in client.models.list().data] == [MODEL]


def test_completions_match_hf_on_cpu(client, tokenizer, hf_greedy):
    for prompt in PROMPTS:
        answer = client.completions.create(model=MODEL, prompt=prompt, logprobs=1,
                                           extra_body=AS_IDS, **GREEDY)
        choice = answer.choices[0]
        assert choice.prompt_token_ids == tokenizer(prompt).input_ids
        assert token_ids(choice.logprobs.tokens) == hf_greedy(choice.prompt_token_ids)
        assert choice.token_ids == hf_greedy(choice.prompt_token_ids)
        assert answer.usage.completion_tokens == MAX_TOKENS


def test_chat_completions_use_the_chat_template_and_match_hf(client, tokenizer, hf_greedy):
    messages = [{"role": "system", "content": "You answer briefly."},
                {"role": "user", "content": "What is the capital of France?"}]
    answer = client.chat.completions.create(model=MODEL, messages=messages, logprobs=True,
                                            extra_body=AS_IDS, **GREEDY)
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(text, add_special_tokens=False).input_ids
    assert answer.prompt_token_ids == prompt_ids
    choice = answer.choices[0]
    assert token_ids([c.token for c in choice.logprobs.content]) == hf_greedy(prompt_ids)
    assert choice.message.role == "assistant"
    assert choice.message.content == tokenizer.decode(hf_greedy(prompt_ids))


def test_streaming_gives_the_same_text_in_pieces(client):
    prompt = PROMPTS[2]
    whole = client.completions.create(model=MODEL, prompt=prompt, extra_body=AS_IDS,
                                      **GREEDY).choices[0].text
    pieces = [c.choices[0].text for c in client.completions.create(
        model=MODEL, prompt=prompt, stream=True, extra_body={"ignore_eos": True}, **GREEDY)
        if c.choices]
    assert len([p for p in pieces if p]) > 1
    assert "".join(pieces) == whole

    messages = [{"role": "user", "content": prompt}]
    chat_whole = client.chat.completions.create(model=MODEL, messages=messages,
                                                extra_body={"ignore_eos": True}, **GREEDY)
    chat_pieces = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=MODEL, messages=messages, stream=True, extra_body={"ignore_eos": True}, **GREEDY)
        if c.choices]
    assert len([p for p in chat_pieces if p]) > 1
    assert "".join(chat_pieces) == chat_whole.choices[0].message.content


def test_64_concurrent_requests_complete_and_match(base_url, tokenizer, hf_greedy):
    # Prompts of 64 different lengths and answers of different lengths, so that requests end
    # at different steps and queued ones take their places in the running batch.
    words = "the cache keeps one copy of the blocks that two prompts share".split()
    prompts = [" ".join(words[i % len(words):] + words * (i // 8)) for i in range(64)]
    lengths = [4 + i % 9 for i in range(64)]

    async def ask_all():
        client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", timeout=300)
        async with client:
            return await asyncio.gather(*(
                client.completions.create(model=MODEL, prompt=p, temperature=0, max_tokens=n,
                                          extra_body={"ignore_eos": True,
                                                      "return_token_ids": True})
                for p, n in zip(prompts, lengths)))

    answers = asyncio.run(ask_all())
    assert len(answers) == 64
    for prompt, n, answer in zip(prompts, lengths, answers):
        choice = answer.choices[0]
        assert choice.finish_reason == "length"
        assert choice.prompt_token_ids == tokenizer(prompt).input_ids
        assert choice.token_ids == hf_greedy(choice.prompt_token_ids, n), prompt


def test_too_long_prompt_is_refused_and_the_server_keeps_serving(client, hf_greedy):
    too_long = " ".join(["word"] * (2 * MAX_MODEL_LEN))
    with pytest.raises(openai.BadRequestError, match="maximum context length|maximum model"):
        client.completions.create(model=MODEL, prompt=too_long, **GREEDY)
    answer = client.completions.create(model=MODEL, prompt=PROMPTS[1], extra_body=AS_IDS,
                                       **GREEDY)
    choice = answer.choices[0]
    assert choice.token_ids == hf_greedy(choice.prompt_token_ids)
