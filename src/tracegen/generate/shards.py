"""Shards: one run split into N disjoint parts that job-array tasks run on their own.

A problem belongs to shard ``sha256(problem id) mod N`` (never Python's salted ``hash()``),
so every sample of a problem is in one shard and every machine splits the same way. Shard
I of N of ``-o traces.jsonl`` writes ``traces-0000I-of-0000N.jsonl`` with its own state
file (and ``--rejects`` alike) and resumes like any run; once every one of its episodes is
attempted it writes ``traces-0000I-of-0000N.jsonl.done``, last. The first shard to start
writes the run's manifest, ``traces.jsonl.manifest.json``: a fingerprint of the plan
(problems, samples, settings hash, N), the per-shard episode counts and the command that
runs a shard. A shard whose plan differs is refused, naming what differs. Each shard's
state header and done marker carry its own `PlanFingerprint` (the plan's, and its episode
count), so a shard left from another plan (after the manifest was removed, or a file
copied in) is told apart by `ShardFiles.foreign`: `tracegen.generate.merge` (which joins
finished shards into one run) and `tracegen.generate.status` refuse it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

import orjson
from pydantic import Field, ValidationError

from tracegen.config import redact_url
from tracegen.episode.spec import Key
from tracegen.errors import ConfigError, InputFileError, OutputError
from tracegen.generate.plan import Plan, PlanFingerprint
from tracegen.generate.runfiles import (
    StateHeader,
    attempted,
    changed_settings,
    run_rows,
    state_path,
)
from tracegen.jsonl import dumps, iter_lines
from tracegen.schema import Record

MANIFEST_SCHEMA: Final = "tracegen.shards/1"
DONE_SCHEMA: Final = "tracegen.shard-done/2"
_FORM = "expected I/N (0 ≤ I < N, e.g. 3/64), auto or auto/N"
_SHARD_NAME = re.compile(r"(?P<stem>.+)-(?P<index>\d+)-of-(?P<count>\d+)(?P<suffix>\.[^.]*)?")


@dataclass(frozen=True)
class Shard:
    """Part ``index`` (from 0) of a run split in ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, problem_id: str) -> bool:
        return shard_of(problem_id, self.count) == self.index


def shard_of(problem_id: str, count: int) -> int:
    """The shard a problem belongs to: a stable hash of its id, the same on every machine."""
    digest = hashlib.sha256(problem_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def shard_plan(plan: Plan, shard: Shard) -> Plan:
    """The part of ``plan`` in ``shard``: the same ids, seeds and settings hash."""
    problems = [p for p in plan.problems if shard.holds(p.id)]
    return Plan(problems, plan.settings, plan.system_prompt, plan.num_samples, plan.seed)


# ---------------------------------------------------------------- which shard this task is


def _int(text: str, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ConfigError(f"{what}: {text!r} is not a whole number") from None


def _array_task(env: Mapping[str, str]) -> tuple[int, int | None, str]:
    """(index from 0, task count if known, variable) of this job-array task."""
    if env.get("SLURM_ARRAY_TASK_ID"):
        task = _int(env["SLURM_ARRAY_TASK_ID"], "SLURM_ARRAY_TASK_ID")
        first = _int(env.get("SLURM_ARRAY_TASK_MIN") or "0", "SLURM_ARRAY_TASK_MIN")
        step = _int(env.get("SLURM_ARRAY_TASK_STEP") or "1", "SLURM_ARRAY_TASK_STEP")
        count = env.get("SLURM_ARRAY_TASK_COUNT")
        total = _int(count, "SLURM_ARRAY_TASK_COUNT") if count else None
        return (task - first) // max(step, 1), total, "SLURM_ARRAY_TASK_ID"
    if env.get("JOB_COMPLETION_INDEX"):
        index = _int(env["JOB_COMPLETION_INDEX"], "JOB_COMPLETION_INDEX")
        return index, None, "JOB_COMPLETION_INDEX"
    if env.get("SGE_TASK_ID", "undefined") != "undefined":
        task = _int(env["SGE_TASK_ID"], "SGE_TASK_ID")
        first = _int(env.get("SGE_TASK_FIRST") or "1", "SGE_TASK_FIRST")
        step = max(_int(env.get("SGE_TASK_STEPSIZE") or "1", "SGE_TASK_STEPSIZE"), 1)
        last = env.get("SGE_TASK_LAST", "undefined")
        total = (_int(last, "SGE_TASK_LAST") - first) // step + 1 if last != "undefined" else None
        return (task - first) // step, total, "SGE_TASK_ID"
    raise ConfigError(
        "--shard auto: no job-array task in the environment (SLURM_ARRAY_TASK_ID, "
        "JOB_COMPLETION_INDEX, SGE_TASK_ID); give --shard I/N"
    )


def parse_shard(text: str, env: Mapping[str, str]) -> Shard:
    """``I/N``, or ``auto`` / ``auto/N`` read from a Slurm, Kubernetes or SGE array task."""
    head, slash, tail = text.strip().partition("/")
    given = _int(tail, f"--shard {text}") if slash else None
    if head.strip() == "auto":
        index, found, variable = _array_task(env)
        if given is not None and found is not None and given != found:
            raise ConfigError(f"--shard {text}: the job array has {found} tasks, not {given}")
        count = given if given is not None else found
        if count is None:
            raise ConfigError(
                f"--shard auto: {variable} gives no task count; give --shard auto/N "
                "(or TRACEGEN_SHARD=auto/N), N being the job's number of completions"
            )
        where = f" ({variable} gives task {index})"
    else:
        if given is None:
            raise ConfigError(f"--shard {text}: {_FORM}")
        index, count, where = _int(head, f"--shard {text}"), given, ""
    if count < 1:
        raise ConfigError(f"--shard {text}: the number of shards must be at least 1")
    if not 0 <= index < count:
        raise ConfigError(f"--shard {text}{where}: the index must be 0 to {count - 1}")
    return Shard(index, count)


# ---------------------------------------------------------------- file names


def shard_file(path: Path, shard: Shard) -> Path:
    """``traces.jsonl`` → ``traces-00003-of-00064.jsonl``."""
    width = max(5, len(str(shard.count)))
    number = f"-{shard.index:0{width}d}-of-{shard.count:0{width}d}"
    return path.with_name(f"{path.stem}{number}{path.suffix}")


def parse_shard_file(path: Path) -> tuple[Path, Shard] | None:
    """(the run's output, the shard) a file named by `shard_file` belongs to, else None."""
    found = _SHARD_NAME.fullmatch(path.name)
    if found is None:
        return None
    index, count = int(found["index"]), int(found["count"])
    if not 0 <= index < count:
        return None
    return path.with_name(found["stem"] + (found["suffix"] or "")), Shard(index, count)


def manifest_path(output: Path) -> Path:
    return output.with_name(output.name + ".manifest.json")


def done_path(shard_output: Path) -> Path:
    return shard_output.with_name(shard_output.name + ".done")


# ---------------------------------------------------------------- the manifest


class Manifest(Record):
    """What every shard of a run must agree on, and what `merge` and `status` need."""

    schema_: Literal["tracegen.shards/1"] = Field(default=MANIFEST_SCHEMA, alias="schema")
    shards: int
    settings_hash: str
    settings: dict[str, Any]
    problems: int
    problems_sha256: str
    num_samples: int
    episodes: list[int]
    """Episodes in each shard."""
    command: list[str]
    """A shard's command, with ``{shard}`` where its ``I/N`` goes."""
    rejects: str | None = None
    """The run's ``--rejects``, whose shards hold rejected traces."""

    def command_for(self, shard: Shard) -> str:
        return shlex.join(a.replace("{shard}", str(shard)) for a in self.command)

    def fingerprint(self, index: int) -> PlanFingerprint:
        """What shard ``index``'s files must carry to be this run's."""
        return PlanFingerprint(
            problems=self.problems,
            problems_sha256=self.problems_sha256,
            num_samples=self.num_samples,
            settings_hash=self.settings_hash,
            shards=self.shards,
            episodes=self.episodes[index],
        )


def plan_manifest(plan: Plan, count: int, command: Sequence[str], rejects: Path | None) -> Manifest:
    """The manifest of ``plan`` split in ``count`` shards."""
    digest = hashlib.sha256()
    per_shard: Counter[int] = Counter()
    for problem in plan.problems:
        digest.update(problem.model_dump_json().encode() + b"\n")
        per_shard[shard_of(problem.id, count)] += 1
    return Manifest(
        shards=count,
        settings_hash=plan.settings_hash,
        settings=plan.settings.record(plan.system_prompt),
        problems=len(plan.problems),
        problems_sha256=digest.hexdigest(),
        num_samples=plan.num_samples,
        episodes=[per_shard[i] * plan.num_samples for i in range(count)],
        command=shard_command(command),
        rejects=str(rejects.absolute()) if rejects is not None else None,
    )


def shard_command(argv: Sequence[str]) -> list[str]:
    """``tracegen`` and ``argv`` with the shard given as ``--shard {shard}`` (without
    ``--overwrite``): a template for the command that runs any one shard. A URL's
    credentials are shown as ``***``: the manifest and the hints printed from it never hold
    a password (pass it in ``TRACEGEN_HOSTS`` instead)."""
    out = ["tracegen"]
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--shard":
            skip = True
        elif not arg.startswith("--shard=") and arg != "--overwrite":
            out.append(redact_url(arg))
    return [*out, "--shard", "{shard}"]


def read_manifest(path: Path) -> Manifest:
    try:
        data = orjson.loads(path.read_bytes())
        return Manifest.model_validate(data)
    except FileNotFoundError:
        raise InputFileError(
            f"{path}: no such file: these are not shards of a `tracegen run --shard` run"
        ) from None
    except (orjson.JSONDecodeError, ValidationError):
        raise InputFileError(f"{path}: not a tracegen shard manifest") from None
    except OSError as e:
        raise InputFileError(f"{path}: cannot read: {e.strerror}") from None


def claim_manifest(output: Path, manifest: Manifest) -> None:
    """Write the run's manifest if no shard has yet (atomically, so shards starting at once
    agree on one), else check this shard's plan is the run's."""
    path = manifest_path(output)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(dumps(manifest))
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror}") from None
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
    differences = _differences(read_manifest(path), manifest)
    if differences:
        raise ConfigError(
            f"{output}: this shard's plan is not the run's ({'; '.join(differences)}, per "
            f"{path}); run every shard with the same settings, give another -o, or remove "
            f"{path.name} to start the whole run afresh"
        )


def _differences(run: Manifest, mine: Manifest) -> list[str]:
    found = []
    if run.shards != mine.shards:
        found.append(f"{mine.shards} shards here, {run.shards} in the run")
    if run.problems != mine.problems:
        found.append(f"{mine.problems} problems here, {run.problems} in the run")
    elif run.problems_sha256 != mine.problems_sha256:
        found.append("the problems differ")
    if run.num_samples != mine.num_samples:
        found.append(f"num-samples {mine.num_samples} here, {run.num_samples} in the run")
    if run.settings_hash != mine.settings_hash:
        changed = changed_settings(run.settings, mine.settings)
        found.append(f"settings changed: {', '.join(changed) or 'settings hash'}")
    return found


# ---------------------------------------------------------------- the done marker


class ShardDone(Record):
    """Written last by a shard whose episodes have all been attempted. A marker tracegen
    cannot read (an older one's) reads as none: running the shard again writes it anew."""

    schema_: Literal["tracegen.shard-done/2"] = Field(default=DONE_SCHEMA, alias="schema")
    shard: int
    plan: PlanFingerprint
    finished_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


def mark_done(shard_output: Path, shard: Shard, manifest: Manifest) -> None:
    path = done_path(shard_output)
    marker = ShardDone(shard=shard.index, plan=manifest.fingerprint(shard.index))
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        temporary.write_bytes(dumps(marker))
        os.replace(temporary, path)
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror}") from None


def unmark_done(shard_output: Path) -> None:
    """The shard has work again (its files were started afresh): not done any more."""
    try:
        done_path(shard_output).unlink(missing_ok=True)
    except OSError as e:
        raise OutputError(f"{done_path(shard_output)}: cannot remove: {e.strerror}") from None


def read_done(shard_output: Path) -> ShardDone | None:
    """The shard's done marker, or None when it has none (or one that is not readable)."""
    try:
        return ShardDone.model_validate(orjson.loads(done_path(shard_output).read_bytes()))
    except (OSError, orjson.JSONDecodeError, ValidationError):
        return None


# ---------------------------------------------------------------- one shard's files


@dataclass(frozen=True)
class ShardFiles:
    """The files of one shard of a run."""

    shard: Shard
    output: Path
    rejects: Path | None

    @property
    def state(self) -> Path:
        return state_path(self.output)

    @classmethod
    def of(cls, output: Path, shard: Shard, manifest: Manifest) -> ShardFiles:
        rejects = Path(manifest.rejects) if manifest.rejects else None
        return cls(
            shard, shard_file(output, shard), shard_file(rejects, shard) if rejects else None
        )

    @property
    def manifest(self) -> Path:
        """The run's manifest, beside the shard."""
        parsed = parse_shard_file(self.output)
        return manifest_path(parsed[0] if parsed else self.output)

    def rows(self) -> Iterator[tuple[Path, int, dict[str, Any]]]:
        """Every whole record of the shard (a cut last line left out)."""
        return run_rows(self.output, self.rejects, self.state, whole_lines=True)

    def attempted(self) -> set[Key]:
        """The episodes the shard would skip if it ran again."""
        return {
            record_key(path, lineno, row)
            for path, lineno, row in self.rows()
            if not is_header(path, row, self.state) and attempted(path, row, self.state)
        }

    def torn(self) -> list[Path]:
        """Its files whose last line is cut."""
        return [p for p in (self.output, self.rejects, self.state) if p and _cut(p)]

    def plans(self) -> Iterator[tuple[Path, PlanFingerprint]]:
        """The plans its done marker and its state's headers (which come before any record)
        say it belongs to; none for files of a tracegen that did not record them."""
        marker = read_done(self.output)
        if marker is not None:
            yield done_path(self.output), marker.plan
        for header in self.headers():
            if header.plan is not None:
                yield self.state, header.plan

    def headers(self) -> Iterator[StateHeader]:
        """The headers of its state file (one per run that wrote to it, before any record)."""
        if not self.state.is_file():
            return
        for _, row in iter_lines(self.state, whole_lines=True):
            if "settings" not in row:
                return
            try:
                yield StateHeader.model_validate(row)
            except ValidationError:
                raise InputFileError(f"{self.state}: not a tracegen state header") from None

    def foreign(self, manifest: Manifest) -> str | None:
        """Why this shard is not of ``manifest``'s plan (one line), or None when it is."""
        run = manifest.fingerprint(self.shard.index)
        for path, plan in self.plans():
            differences = plan.differences(run, here="there")
            if differences:
                return (
                    f"{path}: shard {self.shard} of another plan ({'; '.join(differences)}, "
                    f"per {self.manifest}); start it afresh: "
                    f"{manifest.command_for(self.shard)} --overwrite"
                )
        return None


def is_header(path: Path, row: dict[str, Any], state: Path) -> bool:
    return path == state and "settings" in row


def record_key(path: Path, lineno: int, row: dict[str, Any]) -> Key:
    try:
        return (str(row["problem_id"]), int(row["sample"]), str(row["mode"]), str(row["model"]))
    except (KeyError, TypeError, ValueError):
        raise InputFileError(f"{path}:{lineno}: not a tracegen record") from None


def _cut(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() == 0:
                return False
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) != b"\n"
    except FileNotFoundError:
        return False
