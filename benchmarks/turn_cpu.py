"""CPU of one model turn in tracegen's process once the server's answer is parsed: its
logprobs read, kept in the transcript, the trace assembled and written.

Three figures per answer length (tokens) and number of alternatives per token (top):

- ``logprobs``: the server's per-token entries made into records (`token_logprobs`);
- ``trace line``: a finished trace with those tokens turned into its JSON line, as a run
  writes it (``dumps(trace.to_row())``);
- ``episode``: a whole ``markers`` episode (the ``/api/chat`` answer read by the Ollama
  backend, the transcript, the scoring, the trace written to its file with its state line),
  with no network and a stand-in sandbox that passes at once.

Each is the least of ``--rounds`` rounds of `time.process_time` over enough repetitions to
take about ``--seconds`` each.

    python benchmarks/turn_cpu.py
    PYTHONPATH=OTHER/src python benchmarks/turn_cpu.py   # another checkout's code
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracegen.config import GenerationSettings
from tracegen.data.prompts import load_prompt
from tracegen.episode.spec import EpisodeSpec
from tracegen.generate.runfiles import RunFiles
from tracegen.grading.filters import Filters
from tracegen.jsonl import dumps
from tracegen.llm.base import token_logprobs
from tracegen.llm.ollama import OllamaBackend
from tracegen.modes import get_mode
from tracegen.schema import ExecResult, Problem, TestCase, TestResult, Trace

HOST = "http://127.0.0.1:9"
WORDS = [" I", " add", " the", " two", " numbers", ",", " then", " check", " it", ".", "\n"]
PROBLEM = Problem(
    id="add",
    prompt="Write `add(a, b)` that returns the sum of two numbers.",
    entry_point="add",
    tests=[TestCase(name="small", kind="io", args=[1, 2], expected=3)],
)
CODE = "\n<code>\ndef add(a, b):\n    return a + b\n</code>\n"


def entries(tokens: int, top: int) -> list[dict[str, Any]]:
    """Ollama's ``logprobs`` array for an answer of ``tokens`` tokens (one thought), as parsed
    from JSON."""
    texts = ["<think>", *(WORDS[i % len(WORDS)] for i in range(tokens - 2)), "</think>"]
    out = []
    for i, text in enumerate(texts[:tokens]):
        out.append(
            {
                "token": text,
                "logprob": -0.001 * (i % 97) - 0.0123,
                "bytes": list(text.encode()),
                "top_logprobs": [
                    {"token": alt, "logprob": -0.5 * (k + 1), "bytes": list(alt.encode())}
                    for k, alt in enumerate(WORDS[:top])
                ],
            }
        )
    return out


def answer(tokens: int, top: int) -> dict[str, Any]:
    """A whole ``/api/chat`` answer whose content is the tokens' text, code last."""
    logprobs = entries(tokens, top)
    text = "".join(e["token"] for e in logprobs)
    return {
        "model": "test-model",
        "message": {"role": "assistant", "content": text + CODE},
        "done": True,
        "done_reason": "stop",
        "logprobs": logprobs,
        "prompt_eval_count": 120,
        "eval_count": tokens,
        "total_duration": 10**9,
        "eval_duration": 8 * 10**8,
    }


class AnsweringOllama(OllamaBackend):
    """The Ollama backend with every request answered by ``body`` in process."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(HOST, "test-model")
        self.body = body

    async def request_json(
        self, method: str, path: str, body: Any, model: str | None = None, **_: Any
    ) -> dict[str, Any]:
        return self.body


class PassingSandbox:
    isolation = "builtin"

    async def run_tests(self, code: str, problem: Problem) -> ExecResult:
        tests = [TestResult(name=t.name, passed=True) for t in problem.tests]
        return ExecResult(status="ok", exit_code=0, tests=tests)

    async def run_code(self, code: str) -> ExecResult:
        return ExecResult(status="ok", exit_code=0)


def cpu_us(work: Callable[[], object], seconds: float, rounds: int) -> float:
    """CPU microseconds of one call of ``work``: the least of ``rounds`` rounds (other jobs
    on the machine only ever add to it)."""
    reps = 1
    while True:
        start = time.process_time()
        for _ in range(reps):
            work()
        took = time.process_time() - start
        if took >= seconds / 4:
            break
        reps *= 2
    reps = max(1, int(reps * seconds / max(took, 1e-6)))
    results = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(reps):
            work()
        results.append((time.process_time() - start) / reps * 1e6)
    return min(results)


def episode_runner(tokens: int, top: int, folder: Path) -> Callable[[], object]:
    settings = GenerationSettings(mode="markers", model="test-model", top_logprobs=top)
    prompt = load_prompt("markers", settings.prompts_dir)
    spec = EpisodeSpec(
        problem=PROBLEM,
        sample=0,
        trace_id="trace-1",
        settings=settings,
        settings_hash=settings.digest(prompt),
        system_prompt=prompt,
        seed=7,
    )
    backend = AnsweringOllama(answer(tokens, top))
    sandbox = PassingSandbox()
    mode = get_mode("markers")
    output = folder / f"out-{tokens}-{top}.jsonl"
    files = RunFiles(
        output, None, settings_hash=spec.settings_hash, settings={}, overwrite=True, warn=print
    )
    filters = Filters(only_success=False, only_ideal=False)
    loop = asyncio.new_event_loop()

    def run() -> None:
        trace = loop.run_until_complete(mode.run(spec, backend, sandbox))  # type: ignore[arg-type]
        files.record(trace, filters.outcome(trace))

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"{'tokens':>6} {'top':>3} {'logprobs µs':>12} {'trace line µs':>14} {'episode µs':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for tokens in (39, 500):
            for top in (0, 5):
                raw = entries(tokens, top)
                trace = Trace.model_validate(
                    {
                        "id": "t",
                        "problem_id": "add",
                        "mode": "markers",
                        "model": "m",
                        "logprobs": [{"message_index": 2, "tokens": raw}],
                    }
                )
                parse = cpu_us(lambda raw=raw: token_logprobs(raw, HOST), args.seconds, args.rounds)
                line = cpu_us(lambda trace=trace: dumps(trace.to_row()), args.seconds, args.rounds)
                run = episode_runner(tokens, top, Path(tmp))
                episode = cpu_us(run, args.seconds, args.rounds)
                print(f"{tokens:>6} {top:>3} {parse:>12.1f} {line:>14.1f} {episode:>11.1f}")
                for name in os.listdir(tmp):
                    os.truncate(Path(tmp, name), 0)


if __name__ == "__main__":
    main()
