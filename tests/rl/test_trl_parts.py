"""`tracegen.trl`'s parts without a trainer: the dataset, the environment's tool and judge,
and the ``rollout_func`` serving ``convert --rl trl`` records."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.support.tiny_models import ADD_PROBLEM
from tests.support.token_traces import (
    ChatmlModel,
    inline_tools,
    make_tokenizer,
    tool_feedback,
    write_trl_records,
)
from tracegen.config import RunSettings
from tracegen.data.prompts import load_prompt, task_message
from tracegen.errors import InputFileError
from tracegen.problems import load_problems
from tracegen.trl import RecordedRollouts, TracegenEnvironment, problems_dataset

MATH = {
    "id": "six",
    "kind": "math",
    "prompt": "What is 2 * 3?",
    "tests": [{"name": "answer", "kind": "answer", "expected": "6"}],
}


@pytest.mark.slow  # imports datasets
def test_a_problem_set_is_a_dataset_of_the_episode_engines_prompts() -> None:
    data = problems_dataset("builtin", limit=2)
    problems = load_problems("builtin", limit=2)
    assert data.column_names == ["prompt", "problem_id", "problem"]
    assert data["problem_id"] == [p.id for p in problems]
    system = load_prompt("native-tools")
    assert data[0]["prompt"] == [
        {"role": "system", "content": system},
        {"role": "user", "content": task_message(problems[0])},
    ]


@pytest.fixture
def env() -> TracegenEnvironment:
    return TracegenEnvironment(RunSettings(sandbox="rlimit", max_iterations=2))


def test_the_tool_runs_scripts_and_the_judge_scores_the_final_program(
    env: TracegenEnvironment,
) -> None:
    env.reset(problem=orjson.dumps(ADD_PROBLEM).decode(), prompt=[])
    assert env.get_reward() == -1.0, "nothing run, nothing to judge"
    answer = orjson.loads(env.python("print(40 + 2)"))
    assert answer == {"status": "ok", "exit_code": 0, "stdout": "42\n", "stderr": ""}
    env.python("def add(a, b):\n    return a + b")
    assert env.get_reward() == 1.0
    refused = orjson.loads(env.python("print(1)"))
    assert refused["status"] == "not-run" and "all 2 scripts" in refused["error"]
    env.reset(problem=orjson.dumps(ADD_PROBLEM).decode())
    env.python("def add(a, b):\n    return a - b")
    assert env.trace().score == 0.0 and env.get_reward() == pytest.approx(-0.9)


def test_a_math_answer_is_the_one_verify_finds_in_the_final_program_run_again(
    env: TracegenEnvironment,
) -> None:
    env.reset(problem=orjson.dumps(MATH).decode())
    env.python("print('The answer is', 2 * 3)\nprint('done')")
    trace = env.trace()
    assert trace.success and trace.final_answer == "6"


def test_the_reward_is_not_what_a_script_printed_when_the_policy_ran_it(
    env: TracegenEnvironment, tmp_path: Path
) -> None:
    """The judge runs the final program again: an answer printed only while the policy
    watched (here the first run of the script) earns nothing."""
    mark = tmp_path / "ran"
    env.reset(problem=orjson.dumps(MATH).decode())
    ran = str(mark)
    script = f"import os\nprint(7 if os.path.exists({ran!r}) else 6)\nopen({ran!r}, 'w')"
    assert orjson.loads(env.python(script))["stdout"] == "6\n"
    assert not env.trace().success


def test_reset_needs_the_problem_column(env: TracegenEnvironment) -> None:
    with pytest.raises(ValueError, match="problems_dataset"):
        env.reset(prompt=[])


@pytest.mark.slow  # imports transformers
def test_the_tool_schema_trl_reads_is_native_tools(env: TracegenEnvironment) -> None:
    from transformers.utils import get_json_schema

    from tracegen.modes.native_tools import PYTHON_TOOL

    schema = get_json_schema(env.python)
    ours = PYTHON_TOOL["function"]
    assert schema["function"]["name"] == ours["name"]
    assert schema["function"]["parameters"]["properties"]["code"]["type"] == "string"
    assert schema["function"]["parameters"]["required"] == ["code"]


def _records(tmp_path: Path) -> Path:
    model = ChatmlModel(make_tokenizer(tmp_path / "tok"))
    traces = [
        tool_feedback(model, 0),
        inline_tools(model, 1),
        inline_tools(model, 2, problem_id="sum"),
    ]
    traces[2].token_requests[0].logprobs = None
    return write_trl_records(tmp_path / "t.rl-trl.jsonl", traces)


def test_recorded_rollouts_serve_each_problems_records_in_turn(tmp_path: Path) -> None:
    rollouts = RecordedRollouts(_records(tmp_path))
    assert rollouts.skipped == 1, "a record without logprobs would crash TRL"
    assert list(rollouts.by_problem) == ["add"], "the dataset's prompts (one per problem)"
    out = rollouts(["add", "add", "add"], None)
    assert out["id"] == ["feedback-0", "inline-1", "feedback-0"]
    assert set(out) >= {"prompt_ids", "completion_ids", "logprobs", "env_mask", "reward"}
    for ids, mask, logprobs in zip(
        out["completion_ids"], out["env_mask"], out["logprobs"], strict=True
    ):
        assert len(ids) == len(mask) == len(logprobs)
    assert RecordedRollouts.reward([], [], reward=out["reward"]) == [1.0, 0.5, 1.0]
    with pytest.raises(KeyError, match="sum"):
        rollouts(["sum"], None)


def test_recorded_rollouts_refuse_what_is_not_trl_records(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_bytes(orjson.dumps({"id": "x"}) + b"\n")
    with pytest.raises(InputFileError, match="not `convert --rl trl` output"):
        RecordedRollouts(path)
    with pytest.raises(InputFileError, match="no such file"):
        RecordedRollouts(tmp_path / "missing.jsonl")


def test_closing_the_shared_sandboxes_ends_their_processes(env: TracegenEnvironment) -> None:
    from tests.support.sandboxes import sandbox_processes
    from tracegen.trl import close_sandboxes

    env.reset(problem=orjson.dumps(ADD_PROBLEM).decode())
    env.python("def add(a, b):\n    return a + b")
    assert sandbox_processes()
    close_sandboxes()
    assert sandbox_processes() == []
    again = TracegenEnvironment(RunSettings(sandbox="rlimit", max_iterations=2))
    again.reset(problem=orjson.dumps(ADD_PROBLEM).decode())
    again.python("def add(a, b):\n    return a + b")
    assert again.get_reward() == 1.0


def test_a_file_an_earlier_script_leaves_is_gone_when_the_final_program_is_judged() -> None:
    """With tracegen's own isolation, each script starts in an empty working directory and
    cannot write outside it: the reward depends on the final program alone."""
    env = TracegenEnvironment(RunSettings(sandbox="builtin", max_iterations=2))
    env.reset(problem=orjson.dumps(ADD_PROBLEM).decode())
    places = "['left', os.path.expanduser('~/left'), '/tmp/tracegen-left', '/dev/shm/left']"
    env.python(
        f"import os\nfor path in {places}:\n"
        "    try:\n        open(path, 'w')\n    except OSError:\n        pass"
    )
    env.python(
        f"import os\n\ndef add(a, b):\n    return 3 if any(map(os.path.exists, {places})) else 0"
    )
    assert env.trace().score == 0.0


def test_a_program_problem_is_rewarded_by_every_test_private_ones_included(
    env: TracegenEnvironment,
) -> None:
    from tests.support.programs import PYTHON, SUM

    problem = SUM.model_dump_json(by_alias=True)
    env.reset(problem=problem, prompt=[])
    env.python(PYTHON["accepted"])
    assert env.trace().verdict.outcome == "accepted" and env.get_reward() == 1.0  # type: ignore[union-attr]
    env.reset(problem=problem, prompt=[])
    env.python(PYTHON["hard-coded"])  # the public test's answer, printed
    verdict = env.trace().verdict
    assert verdict is not None and [t.outcome for t in verdict.tests] == ["accepted", "wrong"]
