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
from tracegen.trl import (
    RecordedRollouts,
    TracegenEnvironment,
    TracegenReward,
    binary_reward,
    close_sandboxes,
    problems_dataset,
    reward,
)
from tracegen.trl.environment import episode_trace, named

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
    assert episode_trace(env).reward == -1.0, "nothing run, nothing to judge"
    answer = orjson.loads(env.python("print(40 + 2)"))
    assert answer == {"status": "ok", "exit_code": 0, "stdout": "42\n", "stderr": ""}
    env.python("def add(a, b):\n    return a + b")
    assert episode_trace(env).reward == 1.0
    refused = orjson.loads(env.python("print(1)"))
    assert refused["status"] == "not-run" and "all 2 scripts" in refused["error"]
    env.reset(problem=orjson.dumps(ADD_PROBLEM).decode())
    env.python("def add(a, b):\n    return a - b")
    assert episode_trace(env).score == 0.0 and episode_trace(env).reward == pytest.approx(-0.9)


def test_a_math_answer_is_the_one_verify_finds_in_the_final_program_run_again(
    env: TracegenEnvironment,
) -> None:
    env.reset(problem=orjson.dumps(MATH).decode())
    env.python("print('The answer is', 2 * 3)\nprint('done')")
    trace = episode_trace(env)
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
    assert not episode_trace(env).success


SAMPLES = Path(__file__).parents[1] / "data" / "problems"


def shipped_row(name: str) -> dict:
    """The first row of a dataset sample, as the dataset ships it (tests/data/problems: rows
    of openai/openai_humaneval and openai/gsm8k, see tests/problems/test_datasets.py)."""
    return orjson.loads((SAMPLES / name).read_bytes().splitlines()[0])


def test_reset_takes_a_row_of_a_dataset_as_it_ships_with_trls_prompt_beside_it(
    env: TracegenEnvironment,
) -> None:
    row = shipped_row("humaneval_sample.jsonl")  # TRL's standard format: "prompt" a string
    env.reset(**row)
    assert env.problem is not None and env.problem.id == "HumanEval/0"
    env.python(row["prompt"] + row["canonical_solution"])
    assert episode_trace(env).success
    gsm8k = shipped_row("gsm8k_sample.jsonl")
    env.reset(prompt=[{"role": "user", "content": gsm8k["question"]}], **gsm8k)
    assert episode_trace(env, "So she makes #### 18").success


def test_reset_takes_a_problem_id_of_the_environments_problem_set() -> None:
    problem = load_problems("builtin", limit=1)[0]
    env = TracegenEnvironment(RunSettings(sandbox="rlimit", problems="builtin"))
    env.reset(prompt=[{"role": "user", "content": "…"}], problem_id=problem.id)
    assert env.problem == problem
    with pytest.raises(ValueError, match=r"problem_id 'nope' is not in the problem set 'builtin'"):
        env.reset(prompt="…", problem_id="nope")


def test_the_environments_problem_set_is_the_one_tracegen_run_reads() -> None:
    """``--problem-ids`` and ``--limit`` choose the problem set as they do for a run: the
    environment reads it through the run setup (`Named`), once for the same settings."""
    first, second = load_problems("builtin", limit=2)
    settings = RunSettings(sandbox="rlimit", problems="builtin", problem_ids=[second.id])
    env = TracegenEnvironment(settings)
    env.reset(prompt="…", problem_id=second.id)
    assert env.problem == second
    with pytest.raises(ValueError, match=f"problem_id '{first.id}' is not in the problem set"):
        env.reset(prompt="…", problem_id=first.id)
    assert named(settings) is named(settings.model_copy())
    assert named(settings)[0].mode.name == "native-tools"


@pytest.mark.parametrize(
    ("row", "said"),
    [
        ({"prompt": [{"role": "user", "content": ""}]}, "(its columns: prompt)"),
        ({"prompt": "Add.", "question_text": "x"}, "(its columns: prompt, question_text)"),
        ({"prompt": "Add.", "problem": "What is 2 + 2?"}, "'problem' column is not a tracegen"),
        ({"prompt": ["…"], "task_id": "HumanEval/0", "entry_point": "f", "test": "x",
          "canonical_solution": ""}, "not a valid HumanEval row: 'prompt' must be"),
    ],
)  # fmt: skip
def test_a_row_that_names_no_problem_is_refused_naming_what_would_do(
    env: TracegenEnvironment, row: dict, said: str
) -> None:
    with pytest.raises(ValueError) as refused:
        env.reset(**row)
    assert said in str(refused.value)
    assert "\n" not in str(refused.value)
    if "its columns" in said:
        assert "problems_dataset" in str(refused.value) and "'problem_id'" in str(refused.value)


@pytest.mark.slow  # imports transformers
def test_the_tool_schema_trl_reads_is_native_tools(env: TracegenEnvironment) -> None:
    import inspect

    from transformers.utils import get_json_schema

    public = [
        name
        for name, _ in inspect.getmembers(TracegenEnvironment, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    ]
    assert public == ["python"], "TRL makes every public method a tool (grpo_trainer.py)"

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
    out = rollouts(["add", "add"], None)
    assert out["id"] == ["feedback-0", "inline-1"]
    assert set(out) >= {"prompt_ids", "completion_ids", "logprobs", "env_mask", "reward"}
    assert set(out) >= {"error_kind", "error_reason", "logprobs_kind", "turn", "token_source"}
    for ids, mask, logprobs in zip(
        out["completion_ids"], out["env_mask"], out["logprobs"], strict=True
    ):
        assert len(ids) == len(mask) == len(logprobs)
    assert RecordedRollouts.reward([], [], reward=out["reward"]) == [1.0, 0.5]
    assert rollouts(["add"], None)["id"] == ["feedback-0"], "the next round starts again"
    with pytest.raises(KeyError, match="sum"):
        rollouts(["sum"], None)


def test_recorded_rollouts_never_repeat_a_record_to_fill_a_group(tmp_path: Path) -> None:
    rollouts = RecordedRollouts(_records(tmp_path))
    with pytest.raises(ValueError, match=r"problem 'add' has 2 records .* group of 3"):
        rollouts(["add", "add", "add"], None)
    grouped = RecordedRollouts(_records(tmp_path), group_size=2)
    assert grouped.lacking == {"sum": 0}, "its one record has no logprobs"
    assert "1 problem with fewer than 2 records left out: sum (0)" in grouped.describe()
    assert grouped.dataset()["prompt"] == ["add"]
    with pytest.raises(InputFileError, match=r"no problem has 3 records .*add \(2\), sum \(0\)"):
        RecordedRollouts(_records(tmp_path), group_size=3)


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
    assert episode_trace(again).reward == 1.0


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
    assert episode_trace(env).score == 0.0


RIGHT = "def add(a, b):\n    return a + b"
WRONG = "def add(a, b):\n    return a - b"


def reply(text: str) -> list[dict[str, object]]:
    """A completion as TRL gives a conversational one to reward functions."""
    return [{"role": "assistant", "content": text}]


def test_a_fenced_final_program_is_judged_like_a_program_run_through_the_tool(
    env: TracegenEnvironment,
) -> None:
    env.reset(problem=orjson.dumps(ADD_PROBLEM).decode())
    fenced = reply(f"Here it is.\n```python\n{RIGHT}\n```")
    assert reward([fenced], environments=[env]) == [1.0], "no tool call, a right final program"
    env.python(RIGHT)
    assert reward([reply("Done.")], environments=[env]) == [1.0]
    env.python(RIGHT)
    wrong_last = reply(f"```python\n{WRONG}\n```")
    assert episode_trace(env, wrong_last).score == 0.0, "the final fenced program is the one judged"
    assert binary_reward([wrong_last, "Done."], environments=[env, env]) == [0.0, 1.0]


def test_a_math_final_answer_in_the_reply_is_judged_without_a_tool_call(
    env: TracegenEnvironment,
) -> None:
    env.reset(problem=orjson.dumps(MATH).decode())
    assert reward([reply("2 * 3 is six.\n#### 6")], environments=[env]) == [1.0]
    assert reward([reply("#### 7")], environments=[env]) == [-1.0]


@pytest.mark.parametrize("code", [None, 3, 2.5, ["print(1)"], {"a": 1}, True])
def test_a_code_argument_that_is_not_a_string_is_a_tool_error(
    env: TracegenEnvironment, code: object
) -> None:
    env.reset(problem=orjson.dumps(ADD_PROBLEM).decode())
    answer = orjson.loads(env.python(code))  # type: ignore[arg-type]
    assert answer["status"] == "not-run" and '"code" must be a string' in answer["error"]
    assert reward(["no program"], environments=[env]) == [-1.0]
    env.python(RIGHT)
    assert reward(["done"], environments=[env]) == [1.0]


def test_an_instance_made_before_close_sandboxes_keeps_working(env: TracegenEnvironment) -> None:
    env.reset(problem=orjson.dumps(ADD_PROBLEM).decode())
    env.python(RIGHT)
    close_sandboxes()
    assert orjson.loads(env.python("print(2)"))["stdout"] == "2\n"
    assert episode_trace(env).reward == 1.0
    close_sandboxes()
    assert episode_trace(env).reward == 1.0


def test_the_reward_needs_the_environments() -> None:
    with pytest.raises(ValueError, match="environment_factory=TracegenEnvironment"):
        reward(["text"])


def test_judged_episodes_go_to_a_trace_file_stats_reads(
    env: TracegenEnvironment, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from tracegen.cli import app

    traces = tmp_path / "trl.jsonl"
    judge = TracegenReward(traces_path=traces)
    prompt = [{"role": "user", "content": "Write add."}]
    env.reset(problem=orjson.dumps(ADD_PROBLEM).decode())
    env.python(RIGHT)
    judge(["done", "```python\n" + WRONG + "\n```"], [env, env], prompts=[prompt, prompt])
    rows = [orjson.loads(line) for line in traces.read_bytes().splitlines()]
    assert [r["sample"] for r in rows] == [0, 1]
    assert [r["success"] for r in rows] == [True, False]
    assert [(m["role"], m["content"]) for m in rows[0]["messages"]] == [
        ("user", "Write add."),
        ("assistant", "done"),
    ]
    result = CliRunner().invoke(app, ["stats", "--json", str(traces)])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert report["traces"] == 2 and report["success_rate"] == 0.5


def test_a_sandbox_closed_while_a_call_was_on_its_way_is_started_again(
    env: TracegenEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracegen.trl import environment

    env.reset(problem=orjson.dumps(ADD_PROBLEM).decode())
    stale = environment._SandboxLoop.shared()
    close_sandboxes()
    handed = iter([stale])
    shared = environment._SandboxLoop.shared.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(
        environment._SandboxLoop,
        "shared",
        classmethod(lambda cls: next(handed, None) or shared(cls)),
    )
    assert orjson.loads(env.python("print(3)"))["stdout"] == "3\n"


def test_a_program_problem_is_rewarded_by_every_test_private_ones_included(
    env: TracegenEnvironment,
) -> None:
    from tests.support.programs import PYTHON, SUM

    problem = SUM.model_dump_json(by_alias=True)
    env.reset(problem=problem, prompt=[])
    env.python(PYTHON["accepted"])
    trace = episode_trace(env)
    assert trace.verdict is not None and trace.verdict.outcome == "accepted"
    assert trace.reward == 1.0
    env.reset(problem=problem, prompt=[])
    env.python(PYTHON["hard-coded"])  # the public test's answer, printed
    verdict = episode_trace(env).verdict
    assert verdict is not None and [t.outcome for t in verdict.tests] == ["accepted", "wrong"]
