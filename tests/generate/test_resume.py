"""Running the same command again finishes the job: no duplicate, no gap, same settings."""

from __future__ import annotations

import pytest

from tests.support.runs import keys, problem_number, read

ALL = sorted((f"p{i}", 0) for i in range(12))


def chats(server) -> list[dict]:
    return [body for path, body, _ in server.requests if path == "/api/chat"]


def test_a_finished_run_run_again_does_nothing(cli, model, workspace):
    assert cli(workspace.args(model)).exit_code == 0
    before = len(chats(model))
    result = cli(workspace.args(model))
    assert result.exit_code == 0
    assert "nothing to do" in result.stdout
    assert len(chats(model)) == before
    assert sorted(keys(workspace.out)) == ALL


def test_resume_runs_only_what_is_missing(cli, model, workspace):
    assert cli(workspace.args(model, "--limit", "5")).exit_code == 0
    result = cli(workspace.args(model, "--num-samples", "2"))
    assert result.exit_code == 0, result.output
    assert "(5 done before)" in result.stdout
    done = sorted(keys(workspace.out))
    assert done == sorted((f"p{i}", s) for i in range(12) for s in (0, 1))
    assert len(chats(model)) == 24


def test_resume_skips_rejected_samples_without_a_rejects_file(cli, model, workspace):
    assert cli(workspace.args(model, "--only-success")).exit_code == 0
    asked = len(chats(model))
    result = cli(workspace.args(model, "--only-success"))
    assert "nothing to do" in result.stdout
    assert len(chats(model)) == asked == 12
    assert len(read(workspace.out)) == 8


def test_resume_skips_samples_in_the_rejects_file(cli, model, workspace):
    args = workspace.args(model, "--only-ideal", "--rejects", str(workspace.rejects))
    assert cli(args).exit_code == 0
    result = cli(args)
    assert "nothing to do" in result.stdout
    assert sorted(keys(workspace.out, workspace.rejects)) == ALL


@pytest.mark.parametrize(
    ("flag", "value", "name"),
    [("--temperature", "0.1", "temperature"), ("--exec-timeout", "3", "exec_timeout")],
)
def test_changed_settings_are_refused_with_one_line(cli, model, workspace, flag, value, name):
    assert cli(workspace.args(model, "--limit", "2")).exit_code == 0
    result = cli(workspace.args(model, flag, value))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"changed: {name}" in line and "--overwrite" in line
    assert len(read(workspace.out)) == 2


def test_overwrite_starts_afresh_with_the_new_settings(cli, model, workspace):
    assert cli(workspace.args(model, "--limit", "2")).exit_code == 0
    result = cli(workspace.args(model, "--temperature", "0.1", "--overwrite"))
    assert result.exit_code == 0, result.output
    traces = read(workspace.out)
    assert sorted(keys(workspace.out)) == ALL
    assert len({t["settings_hash"] for t in traces}) == 1


def test_a_cut_last_line_is_repaired_and_reported(cli, model, workspace):
    assert cli(workspace.args(model, "--limit", "3")).exit_code == 0
    data = workspace.out.read_bytes()
    workspace.out.write_bytes(data[: -len(data.splitlines()[-1]) // 2 - 1])
    result = cli(workspace.args(model))
    assert result.exit_code == 0, result.output
    assert "incomplete last line" in result.stderr
    assert sorted(keys(workspace.out)) == ALL


def test_the_same_seed_sends_the_same_seeds_in_the_same_order(cli, model, workspace):
    def seeded_run(output: str, seed: str) -> list[tuple[int, int]]:
        first = len(chats(model))
        args = workspace.args(model, "--seed", seed, "--concurrency", "1", "-o", output)
        assert cli(args).exit_code == 0
        return [(problem_number(b), b["options"]["seed"]) for b in chats(model)[first:]]

    one = seeded_run(str(workspace.dir / "a.jsonl"), "7")
    two = seeded_run(str(workspace.dir / "b.jsonl"), "7")
    other = seeded_run(str(workspace.dir / "c.jsonl"), "8")
    assert one == two
    assert [n for n, _ in one] != list(range(12))
    assert sorted(n for n, _ in one) == list(range(12))
    assert len({s for _, s in one}) == 12
    assert one != other
    assert [t["id"] for t in read(workspace.dir / "a.jsonl")] == [
        t["id"] for t in read(workspace.dir / "b.jsonl")
    ]
