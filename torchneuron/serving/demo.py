"""`make serve-demo`: `vllm serve` runs a tiny local Llama on neuron and the `openai` client asks
it for a completion, a chat answer and a streamed completion; then the server stops. The model
is random (tiny_model.py), so its words are noise: what the demo shows is the path a real model
takes, and where it ran. No memory option is given: the KV cache gets the platform's default.

    .venv-serve/bin/python -m torchneuron.serving.demo [--model-dir DIR]
"""

from __future__ import annotations

import argparse
import pathlib
import re
import time

from . import tiny_model
from .server_process import free_port, server, vllm_serve_command

NAME = "tiny-llama"
COMPLETION_PROMPT = "The device trains and"
MAX_TOKENS = 12


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=pathlib.Path,
                        default=pathlib.Path(".venv-serve") / NAME)
    args = parser.parse_args()

    from openai import OpenAI

    if not (args.model_dir / "config.json").exists():
        tiny_model.build(args.model_dir)
    # Said first, so that nobody takes the noise below for a broken device.
    print(f"The model ({args.model_dir}) is a tiny Llama with seeded random weights and a "
          "tokenizer trained on a paragraph (tiny_model.py): its answers are noise (random "
          "tokens, some of them stray bytes), as expected. What the demo shows is the path a real model takes, on neuron.", flush=True)
    log = args.model_dir.with_name("serve-demo.log")
    port = free_port()
    command = vllm_serve_command(args.model_dir, port, "--served-model-name", NAME,
                                 "--dtype", "float32", "--max-model-len", "256",
                                 "--max-num-seqs", "8", "--enforce-eager")
    print("$", " ".join(command), flush=True)
    print(f"waiting for the server to start (its log: {log})", flush=True)
    start = time.monotonic()
    with server(command, port, log) as url:
        print(f"server up in {time.monotonic() - start:.0f} s")
        for line in log.read_text().splitlines():
            if re.search(r"memory for the KV cache|KV cache size|backend=neuron", line):
                print("  ", line.split("] ", 1)[-1])
        client = OpenAI(base_url=url + "/v1", api_key="unused")
        print("models:", [m.id for m in client.models.list().data])
        answer = client.completions.create(model=NAME, prompt=COMPLETION_PROMPT,
                                           max_tokens=MAX_TOKENS, temperature=0)
        print("completion:", repr(answer.choices[0].text))
        chat = client.chat.completions.create(
            model=NAME, max_tokens=MAX_TOKENS, temperature=0,
            messages=[{"role": "user", "content": "What is the capital of France?"}])
        print("chat:", repr(chat.choices[0].message.content))
        print("stream:", end=" ", flush=True)
        for chunk in client.completions.create(model=NAME, prompt="Count from one to ten:",
                                               max_tokens=MAX_TOKENS, temperature=0, stream=True):
            print(repr(chunk.choices[0].text), end=" ", flush=True)
        print()
    print("server stopped. A real model: `.venv-serve/bin/vllm serve PATH --dtype float32` "
          "(docs/serving.md).")


if __name__ == "__main__":
    main()
