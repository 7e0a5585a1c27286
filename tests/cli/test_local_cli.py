"""`tracegen run --backend local` refusing what cannot work: one line, exit status 2, nothing
written. No model is loaded: each case stops before."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.gguf import write_gguf
from tests.support.runs import clean_env

TRACEBACK = "Traceback (most recent call last)"


def run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracegen", "run", "--mode", "markers", "--limit", "1", *args],
        env={**clean_env(), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def refused(result: subprocess.CompletedProcess[str], pattern: str, out: Path) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and TRACEBACK not in result.stderr, result.stderr
    assert re.search(pattern, lines[0]), lines[0]
    assert not out.exists() and not out.with_name(out.name + ".state").exists()


def test_a_missing_model_file(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    result = run(["--backend", "local", "--model", str(tmp_path / "m.gguf"), "-o", str(out)])
    refused(result, r"m\.gguf: model file not found", out)


def test_a_file_that_is_not_gguf(tmp_path: Path) -> None:
    model, out = tmp_path / "weights.bin", tmp_path / "t.jsonl"
    model.write_bytes(b"\x7fELF" + bytes(100))
    result = run(["--backend", "local", "--model", str(model), "-o", str(out)])
    refused(result, r"weights\.bin: not a GGUF model file", out)


def test_a_context_far_beyond_memory(tmp_path: Path) -> None:
    model = write_gguf(tmp_path / "m.gguf", chat_template="{{ messages }}", layers=4000)
    out = tmp_path / "t.jsonl"
    args = ["--backend", "local", "--model", str(model), "--num-ctx", "1000000", "-o", str(out)]
    refused(run(args), r"needs .* GB of KV cache .* lower --num-ctx or --concurrency", out)


def test_the_engine_not_installed(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "xllamacpp"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no xllamacpp here')\n")
    out = tmp_path / "t.jsonl"
    env = clean_env()
    result = run(
        ["--backend", "local", "-o", str(out)],
        PYTHONPATH=f"{tmp_path / 'shadow'}:{env['PYTHONPATH']}",
    )
    refused(result, r"needs llama\.cpp's Python bindings .*pip install 'tracegen\[local\]'", out)


def test_constraining_an_ollama_run_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    result = run(["--backend", "ollama", "--constrain", "on", "-o", str(out)])
    refused(result, r"--constrain on needs a backend that takes a grammar", out)


def test_the_embedded_model_on_ray_workers_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    result = run(["--backend", "local", "--executor", "ray", "-o", str(out)])
    refused(result, r"--executor ray runs episodes in other processes.* give --host", out)
