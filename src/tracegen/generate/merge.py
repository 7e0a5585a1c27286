"""`tracegen merge`: a sharded run's parts joined into one (see `tracegen.generate.shards` for
the files a shard writes).

`merge` refuses while a shard is missing or not done (each is listed with the command that
finishes it) unless ``allow_partial``; every record must carry the run's settings hash, and
a shard whose done marker or state names another plan (`ShardFiles.foreign`) is refused
whatever the flags. A merge that holds fewer episodes than the plan says so (`partial`).
It writes the output (accepted traces), the rejects when asked, and the union state file,
so a later plain ``tracegen run -o OUT`` with the same settings resumes exactly: each
episode once, by the rules `RunFiles` resumes with (a whole trace in an output or rejects
file, or a rejected or failed state line). A last line a crash cut (or a shard still
writes) is ignored. The files are written beside their final names and renamed into place,
so an interrupted merge leaves no half-written output. Its counts are those of the records
it wrote.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tracegen.episode.spec import Key
from tracegen.errors import ConfigError, InputFileError, OutputError
from tracegen.generate.runfiles import StateHeader, StateLine, state_path
from tracegen.generate.shards import (
    Manifest,
    Shard,
    ShardFiles,
    manifest_path,
    parse_shard_file,
    read_done,
    read_manifest,
    record_key,
)
from tracegen.grading.filters import failed_row
from tracegen.jsonl import JsonlWriter, check_outputs, iter_lines

_GLOB = set("*?[")
_SIDECARS = (".state", ".done")


# ---------------------------------------------------------------- merge


@dataclass
class MergeReport:
    """What a merge wrote, counted from the records themselves."""

    output: Path
    shards: int
    merged: list[int]
    not_done: list[int]
    missing: list[int]
    planned: int
    outcomes: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    torn: list[Path] = field(default_factory=list)
    rejects: Path | None = None
    short: dict[int, int] = field(default_factory=dict)
    """Done shards holding fewer episodes than their plan: shard → how many fewer."""

    @property
    def episodes(self) -> int:
        return sum(self.outcomes.values())

    @property
    def partial(self) -> bool:
        """Whether the merged run holds fewer episodes than the plan."""
        return bool(self.not_done or self.missing or self.short) or self.episodes < self.planned

    def partial_reason(self) -> str:
        """What is missing, in a line: shards missing, not done, short of episodes."""
        parts = [
            f"{what}: {', '.join(str(i) for i in shards)}"
            for what, shards in (
                ("shards missing", self.missing),
                ("not done", self.not_done),
                ("short of episodes", sorted(self.short)),
            )
            if shards
        ]
        return f"{self.episodes} of {self.planned} episodes of the plan ({'; '.join(parts)})"


def expand(sources: list[str]) -> list[Path]:
    """Files named or matched by glob patterns (a shard's state file and done marker left
    out), each once, in order."""
    found: dict[Path, Path] = {}
    for source in sources:
        if _GLOB & set(source):
            matches = [m for m in sorted(glob.glob(source)) if not m.endswith(_SIDECARS)]
            if not matches:
                raise InputFileError(f"{source}: no file matches")
        else:
            matches = [source]
        for match in matches:
            path = Path(match)
            found.setdefault(path.resolve(), path)
    return list(found.values())


def _identify(paths: list[Path]) -> tuple[Path, int, dict[int, Path]]:
    """The run's output, its shard count, and each shard's file."""
    runs: dict[tuple[str, int], dict[int, Path]] = {}
    for path in paths:
        if not path.is_file():
            raise InputFileError(f"{path}: no such file")
        parsed = parse_shard_file(path)
        if parsed is None:
            raise InputFileError(
                f"{path}: not a shard's output (names look like traces-00003-of-00064.jsonl)"
            )
        output, shard = parsed
        seen = runs.setdefault((output.name, shard.count), {})
        if shard.index in seen:
            raise InputFileError(f"shard {shard} given twice: {seen[shard.index]} and {path}")
        seen[shard.index] = path
    if len(runs) > 1:
        (a, n), (b, m) = list(runs)[:2]
        raise InputFileError(f"these are shards of two runs: {a} in {n}, {b} in {m}")
    [((name, count), given)] = runs.items()
    return Path(name), count, given


def merge(
    output: Path,
    sources: list[str],
    *,
    rejects: Path | None = None,
    allow_partial: bool = False,
    overwrite: bool = False,
    notice: Callable[[str], None],
) -> MergeReport:
    """Join the shards matched by ``sources`` into ``output``; see the module docstring."""
    check_outputs((), output, rejects)
    name, count, given = _identify(expand(sources))
    base = next(iter(given.values())).with_name(name.name)
    manifest = read_manifest(manifest_path(base))
    if manifest.shards != count:
        raise InputFileError(
            f"{given[min(given)]}: a shard of {count}, but {manifest_path(base)} says "
            f"{manifest.shards} shards"
        )
    shards = {
        i: ShardFiles.of(p.with_name(base.name), Shard(i, count), manifest)
        for i, p in given.items()
    }
    for files in shards.values():
        foreign = files.foreign(manifest)
        if foreign is not None:
            raise InputFileError(foreign)
    not_done = sorted(i for i, f in shards.items() if read_done(f.output) is None)
    missing = sorted(set(range(count)) - set(shards))
    if (not_done or missing) and not allow_partial:
        _refuse(base, manifest, shards, not_done, missing, notice)
    targets = _targets(output, rejects, manifest, shards, overwrite=overwrite)
    report = MergeReport(
        output=output,
        shards=count,
        merged=sorted(shards),
        not_done=not_done,
        missing=missing,
        planned=sum(manifest.episodes),
        rejects=rejects,
    )
    done = set(shards) - set(not_done)
    _Writer(targets, manifest, report, done, allow_partial).write(
        [shards[i] for i in sorted(shards)]
    )
    return report


def _refuse(
    base: Path,
    manifest: Manifest,
    shards: dict[int, ShardFiles],
    not_done: list[int],
    missing: list[int],
    notice: Callable[[str], None],
) -> None:
    for index in sorted([*not_done, *missing]):
        shard = Shard(index, manifest.shards)
        files = shards.get(index) or ShardFiles.of(base, shard, manifest)
        if index in missing:
            why = f"not given ({files.output} exists)" if files.output.exists() else "missing"
        else:
            why = f"not done ({len(files.attempted())} of {manifest.episodes[index]} episodes)"
        notice(f"shard {shard} ({files.output.name}): {why}; run: {manifest.command_for(shard)}")
    raise InputFileError(
        f"{len(not_done) + len(missing)} of {manifest.shards} shards are not done (listed "
        "above): finish them, or merge what there is with --allow-partial"
    )


def _targets(
    output: Path,
    rejects: Path | None,
    manifest: Manifest,
    shards: dict[int, ShardFiles],
    *,
    overwrite: bool,
) -> tuple[Path, Path | None, Path]:
    """Where the merge writes: output, rejects and state; checked before anything is read."""
    if rejects is not None and manifest.rejects is None:
        raise ConfigError("--rejects: the shards kept no rejects (they ran without --rejects)")
    targets = [output, rejects, state_path(output)]
    inputs = [p for f in shards.values() for p in (f.output, f.rejects, f.state) if p]
    for target in targets:
        if target is None:
            continue
        check_outputs(inputs, target)
        if target.is_dir():
            raise OutputError(f"{target}: is a directory")
        if target.exists() and not overwrite:
            raise ConfigError(
                f"{target} exists; give --overwrite to replace it (and the merged run's "
                "other files), or another output"
            )
    return output, rejects, state_path(output)


class _Writer:
    """Writes the merged files beside their names, then renames them into place."""

    def __init__(
        self,
        targets: tuple[Path, Path | None, Path],
        manifest: Manifest,
        report: MergeReport,
        done: set[int],
        allow_partial: bool,
    ) -> None:
        self.targets = [t for t in targets if t is not None]
        self.manifest = manifest
        self.report = report
        self.done = done
        self.allow_partial = allow_partial
        self.keys: set[Key] = set()
        self.temporary = {t: t.with_name(f".{t.name}.merging") for t in self.targets}
        output, rejects, state = targets
        for t in self.temporary.values():
            with contextlib.suppress(FileNotFoundError):
                t.unlink()
        self.out = JsonlWriter(self.temporary[output])
        self.rej = JsonlWriter(self.temporary[rejects]) if rejects is not None else None
        self.state = JsonlWriter(self.temporary[state])

    def write(self, shards: list[ShardFiles]) -> None:
        try:
            header = StateHeader(
                settings_hash=self.manifest.settings_hash,
                settings=self.manifest.settings,
                run=_shared_run(shards),
            )
            self.state.write(header.row())
            for files in shards:
                self._shard(files)
            for w in (self.out, self.rej, self.state):
                if w is not None:
                    w.close()
            for target in self.targets:
                os.replace(self.temporary[target], target)
        except OSError as e:
            raise OutputError(f"{self.report.output}: cannot write: {e.strerror}") from None
        finally:
            for w in (self.out, self.rej, self.state):
                if w is not None:
                    w.close()
            for t in self.temporary.values():
                with contextlib.suppress(FileNotFoundError):
                    t.unlink()

    def _shard(self, files: ShardFiles) -> None:
        before = self.report.episodes
        self._records(files)
        index = files.shard.index
        short = self.manifest.episodes[index] - (self.report.episodes - before)
        if index in self.done and short > 0:
            self.report.short[index] = short
            if not self.allow_partial:
                raise InputFileError(
                    f"{files.output}: marked done but {short} of its "
                    f"{self.manifest.episodes[index]} episodes are not in its files; run it "
                    f"again ({self.manifest.command_for(files.shard)}), or merge what there is "
                    "with --allow-partial"
                )

    def _records(self, files: ShardFiles) -> None:
        self.report.torn += files.torn()
        pending: dict[Key, dict[str, Any]] = {}
        for path, lineno, row in self._rows(files.state):
            if "settings" not in row and row.get("outcome") != "accepted":
                pending[record_key(path, lineno, row)] = row
        for path, lineno, row in self._rows(files.output):
            if self._new(record_key(path, lineno, row)):
                self.out.write(row)
                self._state(_state_line(path, lineno, row, "accepted"))
        for path, lineno, row in self._rows(files.rejects):
            key = record_key(path, lineno, row)
            if self._new(key):
                if self.rej is not None:
                    self.rej.write(row)
                line = pending.pop(key, None)
                outcome = "failed" if failed_row(row) else "rejected"
                self._state(line if line is not None else _state_line(path, lineno, row, outcome))
        for key, line in pending.items():
            if self._new(key):
                self._state(line)

    def _rows(self, path: Path | None) -> Iterator[tuple[Path, int, dict[str, Any]]]:
        """Whole lines of ``path`` (if it exists), each made with the run's settings."""
        if path is None or not path.exists():
            return
        for lineno, row in iter_lines(path, whole_lines=True):
            found = row.get("settings_hash")
            if found != self.manifest.settings_hash:
                raise InputFileError(
                    f"{path}:{lineno}: made with other settings (settings hash {found}, the "
                    f"run's is {self.manifest.settings_hash}); it cannot be merged"
                )
            yield path, lineno, row

    def _new(self, key: Key) -> bool:
        if key in self.keys:
            self.report.duplicates += 1
            return False
        self.keys.add(key)
        return True

    def _state(self, line: dict[str, Any] | StateLine) -> None:
        self.state.write(line)
        outcome = line.outcome if isinstance(line, StateLine) else str(line["outcome"])
        self.report.outcomes[outcome] += 1


def _shared_run(shards: list[ShardFiles]) -> dict[str, Any] | None:
    """What the shards' runs decided (`StateHeader.run`) when they all decided the same; none
    when they differ (one shard on another backend) or none recorded it."""
    runs = [h.run for files in shards for h in files.headers() if h.run is not None]
    return runs[0] if runs and all(run == runs[0] for run in runs) else None


def _state_line(path: Path, lineno: int, row: dict[str, Any], outcome: str) -> StateLine:
    fields = ("id", "problem_id", "sample", "mode", "model", "settings_hash")
    try:
        return StateLine.model_validate({**{k: row[k] for k in fields}, "outcome": outcome})
    except (KeyError, ValidationError):
        raise InputFileError(f"{path}:{lineno}: not a tracegen trace") from None


# ---------------------------------------------------------------- the commands


def merge_command(
    output: Path,
    sources: list[str],
    *,
    rejects: Path | None,
    allow_partial: bool,
    overwrite: bool,
) -> None:
    """`tracegen merge`: merge, then one table of what was written."""

    from tracegen.terminal import console, text_table, untrusted

    errors = console(stderr=True, highlight=False, soft_wrap=True)
    report = merge(
        output,
        sources,
        rejects=rejects,
        allow_partial=allow_partial,
        overwrite=overwrite,
        notice=lambda line: errors.print(f"tracegen: {line}", markup=False),
    )
    for path in report.torn:
        errors.print(f"tracegen: warning: {path}: ignored an incomplete last line", markup=False)
    table = text_table(title="tracegen merge", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("shards", untrusted(f"{len(report.merged)} of {report.shards} merged"))
    if report.partial:
        table.add_row("partial", untrusted(report.partial_reason()))
        errors.print(f"tracegen: warning: partial: {report.partial_reason()}", markup=False)
    n = report.outcomes
    table.add_row("episodes", untrusted(f"{report.episodes} of {report.planned} in the plan"))
    table.add_row("accepted", untrusted(f"{n['accepted']} (in {report.output})"))
    kept = f" (in {report.rejects})" if report.rejects else ""
    table.add_row("rejected", untrusted(f"{n['rejected']}{kept}"))
    table.add_row("failed", untrusted(f"{n['failed']}{kept}"))
    if report.duplicates:
        table.add_row("duplicates dropped", untrusted(str(report.duplicates)))
    table.add_row("state", untrusted(str(state_path(report.output))))
    console(highlight=False).print(table)
