"""Sharded runs: job-array tasks each run a part of the plan; `merge` joins the parts into one
run that `tracegen run` resumes, and `status` shows how far each part is."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.support.fake_ollama import FakeOllama
from tests.support.runs import Workspace, keys, read, tracegen
from tracegen.errors import ConfigError
from tracegen.generate.shards import Shard, parse_shard, shard_of

N = 3
ALL = sorted((f"p{i}", s) for i in range(12) for s in range(2))


def shard_args(workspace: Workspace, server: FakeOllama, index: int, *extra: str) -> list[str]:
    return workspace.args(
        server,
        "--num-samples",
        "2",
        "--only-ideal",
        "--rejects",
        str(workspace.rejects),
        "--shard",
        f"{index}/{N}",
        *extra,
    )


def shard_out(workspace: Workspace, index: int, name: str = "traces") -> Path:
    return workspace.dir / f"{name}-{index:05d}-of-{N:05d}.jsonl"


def run_shards(cli, workspace: Workspace, server: FakeOllama, *indices: int) -> None:
    for index in indices or range(N):
        result = cli(shard_args(workspace, server, index))
        assert result.exit_code == 0, result.output


def merge_args(workspace: Workspace, *extra: str) -> list[str]:
    merged = workspace.dir / "merged.jsonl"
    shards = str(workspace.dir / f"traces-*-of-{N:05d}.jsonl")
    return ["merge", str(merged), shards, *extra]


def state(output: Path) -> Path:
    return output.with_name(output.name + ".state")


def ids(*paths: Path) -> list[str]:
    return sorted(r["id"] for p in paths for r in read(p))


@pytest.mark.slow
def test_shards_run_apart_then_merged_hold_the_episodes_of_one_run_once_each(workspace, model):
    one = dataclasses.replace(
        workspace, out=workspace.dir / "one.jsonl", rejects=workspace.dir / "one-rejects.jsonl"
    )
    args = one.args(model, "--num-samples", "2", "--only-ideal", "--rejects", str(one.rejects))
    assert tracegen(args).returncode == 0
    for index in range(N):
        result = tracegen(shard_args(workspace, model, index))
        assert result.returncode == 0, result.stderr
        assert f"shard {index}/{N} is done" in result.stdout
    problems = [{r["problem_id"] for r in read(shard_out(workspace, i))} for i in range(N)]
    assert sum(len(p) for p in problems) == len(set().union(*problems))  # disjoint

    status = tracegen(["status", str(workspace.out)])
    assert status.returncode == 0, status.stderr
    assert re.search(rf"all\s+│ 24/24\s+│ {N} done", status.stdout), status.stdout

    merged, merged_rejects = workspace.dir / "merged.jsonl", workspace.dir / "merged-rejects.jsonl"
    result = tracegen(merge_args(workspace, "--rejects", str(merged_rejects)))
    assert result.returncode == 0, result.stderr
    assert f"{N} of {N} merged" in result.stdout
    assert ids(merged) == ids(one.out)
    assert ids(merged, merged_rejects) == ids(one.out, one.rejects)
    assert sorted(keys(merged, merged_rejects)) == ALL

    again = dataclasses.replace(workspace, out=merged, rejects=merged_rejects)
    args = again.args(model, "--num-samples", "2", "--only-ideal", "--rejects", str(merged_rejects))
    result = tracegen(args)
    assert result.returncode == 0, result.stderr
    assert "nothing to do: all 24 episodes were already run" in result.stdout


@pytest.mark.slow
def test_merge_refuses_a_missing_shard_naming_the_command_that_runs_it(workspace, model):
    assert tracegen(shard_args(workspace, model, 0)).returncode == 0
    result = tracegen(merge_args(workspace))
    assert result.returncode == 2
    *listed, error = result.stderr.strip().splitlines()
    assert [line.split(" (")[0] for line in listed] == [
        "tracegen: shard 1/3",
        "tracegen: shard 2/3",
    ]
    assert listed[0].endswith(" ".join(["--shard", "1/3"]))
    assert "missing; run: tracegen run --mode markers" in listed[0]
    assert error.startswith("tracegen: error: 2 of 3 shards are not done")
    assert "--allow-partial" in error
    assert not (workspace.dir / "merged.jsonl").exists()


@pytest.mark.slow
def test_an_unfinished_shard_is_refused_merged_with_allow_partial_then_finished_by_run(
    cli, workspace, model
):
    run_shards(cli, workspace, model)
    cut = shard_out(workspace, 1)
    cut.with_name(cut.name + ".done").unlink()
    for path in (cut, cut.with_name(cut.name + ".state")):
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-1]))  # a kill -9 left the last episode unrecorded
    status = cli(["status", str(workspace.out)])
    assert status.exit_code == 0
    assert "stopped" in status.stdout

    refused = cli(merge_args(workspace))
    assert refused.exit_code == 2
    assert "shard 1/3" in refused.stderr and "not done (" in refused.stderr

    merged = workspace.dir / "merged.jsonl"
    merged_rejects = workspace.dir / "merged-rejects.jsonl"
    partial = cli(merge_args(workspace, "--allow-partial", "--rejects", str(merged_rejects)))
    assert partial.exit_code == 0, partial.output
    assert "23 of 24 episodes of the plan (not done: 1)" in partial.stdout
    assert "warning: partial: 23 of 24 episodes" in partial.stderr
    assert len(keys(merged, merged_rejects)) == 23

    finish = dataclasses.replace(workspace, out=merged, rejects=merged_rejects)
    args = finish.args(
        model, "--num-samples", "2", "--only-ideal", "--rejects", str(merged_rejects)
    )
    result = cli(args)
    assert result.exit_code == 0, result.output
    assert "1 episodes to go (23 done before)" in result.stdout
    assert sorted(keys(merged, merged_rejects)) == ALL


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--shard", "1/4"], "4 shards here, 3 in the run"),
        (["--num-samples", "3"], "num-samples 3 here, 2 in the run"),
        (["--temperature", "0.1"], "settings changed: temperature"),
        (["--limit", "5"], "5 problems here, 12 in the run"),
    ],
)
def test_a_shard_of_another_plan_is_refused_naming_what_differs(
    cli, workspace, model, extra, named
):
    run_shards(cli, workspace, model, 0)
    result = cli(shard_args(workspace, model, 1, *extra))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert named in line and "manifest.json" in line


def other_workspace(workspace: Workspace, tmp_path: Path) -> Workspace:
    """A workspace beside ``workspace`` on the same problems, for a run of another plan."""
    home = tmp_path / "other"
    other = Workspace(home, workspace.problems, home / "traces.jsonl", tmp_path / "r.jsonl")
    other.dir.mkdir()
    return other


def copy_shard(source: Workspace, index: int, into: Workspace) -> None:
    for path in source.dir.glob(f"traces-{index:05d}-of-{N:05d}.jsonl*"):
        shutil.copy(path, into.dir / path.name)


@pytest.mark.slow
def test_merge_refuses_a_shard_made_with_other_settings(cli, workspace, model, tmp_path):
    run_shards(cli, workspace, model)
    other = other_workspace(workspace, tmp_path)
    assert cli(shard_args(other, model, 1, "--temperature", "0.1")).exit_code == 0
    copy_shard(other, 1, workspace)
    result = cli(merge_args(workspace))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "traces-00001-of-00003.jsonl.done: shard 1/3 of another plan (settings hash" in line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--limit", "10"], "10 problems there, 12 in the run"),
        (["--num-samples", "3"], "num-samples 3 there, 2 in the run"),
    ],
)
def test_merge_and_status_refuse_a_finished_shard_of_another_plan_naming_what_differs(
    cli, workspace, model, tmp_path, extra, named
):
    run_shards(cli, workspace, model)
    other = other_workspace(workspace, tmp_path)
    assert cli(shard_args(other, model, 2, *extra)).exit_code == 0
    copy_shard(other, 2, workspace)
    for command in (merge_args(workspace), ["status", str(workspace.out)]):
        result = cli(command)
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert "traces-00002-of-00003.jsonl.done: shard 2/3 of another plan" in line
        assert named in line and "--shard 2/3 --overwrite" in line
    assert not (workspace.dir / "merged.jsonl").exists()


@pytest.mark.slow
def test_an_old_shard_left_after_the_manifest_is_removed_is_refused_until_run_afresh(
    cli, workspace, model
):
    run_shards(cli, workspace, model)
    (workspace.dir / "traces.jsonl.manifest.json").unlink()  # start afresh as the docs say
    for index in (0, 1):
        result = cli(shard_args(workspace, model, index, "--num-samples", "1", "--overwrite"))
        assert result.exit_code == 0, result.output
    refused = cli(merge_args(workspace))
    assert refused.exit_code == 2
    (line,) = refused.stderr.strip().splitlines()
    assert "shard 2/3 of another plan (num-samples 2 there, 1 in the run" in line

    again = cli(shard_args(workspace, model, 2, "--num-samples", "1"))  # its files are refused
    assert again.exit_code == 2
    assert "holds a shard of another plan (num-samples 1 here, 2 in its files)" in again.stderr
    afresh = cli(shard_args(workspace, model, 2, "--num-samples", "1", "--overwrite"))
    assert afresh.exit_code == 0, afresh.output
    merged_rejects = workspace.dir / "merged-rejects.jsonl"
    merged = cli(merge_args(workspace, "--rejects", str(merged_rejects)))
    assert merged.exit_code == 0, merged.output
    assert "12 of 12 in the plan" in merged.stdout and "partial" not in merged.output
    found = keys(workspace.dir / "merged.jsonl", merged_rejects)
    assert sorted(found) == sorted((f"p{i}", 0) for i in range(12))


@pytest.mark.slow
def test_merge_refuses_two_files_of_one_shard(cli, workspace, model):
    run_shards(cli, workspace, model)
    copy = workspace.dir / "copy"
    copy.mkdir()
    shutil.copy(shard_out(workspace, 1), copy)
    result = cli([*merge_args(workspace), str(copy / shard_out(workspace, 1).name)])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "shard 1/3 given twice" in line


def test_merge_ignores_a_torn_last_line_and_says_so(cli, workspace, model):
    run_shards(cli, workspace, model)
    torn = shard_out(workspace, 0)
    with torn.open("ab") as fh:
        fh.write(b'{"schema":"tracegen.trace/1","id":"cut-by-a-cra')
    result = cli(merge_args(workspace))
    assert result.exit_code == 0, result.output
    assert f"{torn}: ignored an incomplete last line" in result.stderr
    merged = read(workspace.dir / "merged.jsonl")  # every line whole JSON
    assert len(merged) == len({r["id"] for r in merged}) > 0


def test_the_merged_state_records_what_the_shards_runs_decided(cli, workspace, model):
    run_shards(cli, workspace, model)
    shard_headers = [read(state(shard_out(workspace, i)))[0] for i in range(N)]
    assert shard_headers[0]["run"]["backend"] == "ollama"
    assert all(h["run"] == shard_headers[0]["run"] for h in shard_headers)
    assert cli(merge_args(workspace)).exit_code == 0
    (header,) = [row for row in read(state(workspace.dir / "merged.jsonl")) if "settings" in row]
    assert header["run"] == shard_headers[0]["run"]
    assert "plan" not in header  # the merged run is not a shard

    # A shard resumed on another backend: the runs differ, and none is claimed for all.
    first = state(shard_out(workspace, 0))
    rows = read(first)
    rows.insert(1, {**rows[0], "run": {**rows[0]["run"], "backend": "openai"}})
    first.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert cli([*merge_args(workspace), "--overwrite"]).exit_code == 0
    (header,) = [row for row in read(state(workspace.dir / "merged.jsonl")) if "settings" in row]
    assert "run" not in header


def test_a_finished_shard_run_again_does_nothing_and_stays_done(cli, workspace, model):
    run_shards(cli, workspace, model, 2)
    result = cli(shard_args(workspace, model, 2))
    assert result.exit_code == 0
    assert "nothing to do" in result.stdout and "shard 2/3 is done" in result.stdout


def test_status_of_a_run_that_was_not_sharded_is_one_line(cli, workspace, model):
    assert cli(workspace.args(model, "--limit", "1")).exit_code == 0
    result = cli(["status", str(workspace.out)])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "not shards of a `tracegen run --shard` run" in line


def test_problems_go_to_shards_by_a_stable_hash_of_their_id():
    assert [shard_of(f"p{i}", 3) for i in range(8)] == [1, 0, 1, 1, 2, 1, 1, 0]
    assert Counter(shard_of(f"task-{i}", 4) for i in range(4000)).keys() == {0, 1, 2, 3}


@pytest.mark.parametrize(
    ("text", "env", "shard"),
    [
        ("3/64", {}, Shard(3, 64)),
        ("auto", {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "8"}, Shard(5, 8)),
        (
            "auto",
            {
                "SLURM_ARRAY_TASK_ID": "6",
                "SLURM_ARRAY_TASK_MIN": "1",
                "SLURM_ARRAY_TASK_COUNT": "8",
            },
            Shard(5, 8),
        ),
        ("auto/16", {"JOB_COMPLETION_INDEX": "15"}, Shard(15, 16)),
        ("auto", {"SGE_TASK_ID": "2", "SGE_TASK_FIRST": "1", "SGE_TASK_LAST": "4"}, Shard(1, 4)),
    ],
)
def test_shard_auto_reads_the_job_array_task(text, env, shard):
    assert parse_shard(text, env) == shard


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("auto", {}, "no job-array task in the environment"),
        ("auto", {"SGE_TASK_ID": "undefined"}, "no job-array task in the environment"),
        ("auto", {"JOB_COMPLETION_INDEX": "2"}, "give --shard auto/N"),
        ("auto/4", {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "8"}, "has 8 tasks"),
        ("auto/4", {"JOB_COMPLETION_INDEX": "4"}, "the index must be 0 to 3"),
        ("4/4", {}, "the index must be 0 to 3"),
        ("2", {}, "expected I/N"),
        ("a/b", {}, "not a whole number"),
    ],
)
def test_a_shard_that_cannot_be_told_is_a_clear_error(text, env, message):
    with pytest.raises(ConfigError, match=message):
        parse_shard(text, env)
