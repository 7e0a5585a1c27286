"""`tracegen merge` and `tracegen status`: a sharded run's parts joined into one, and how far
each part is (see `tracegen.generate.shards` for the files a shard writes).

`merge` refuses while a shard is missing or not done (each is listed with the command that
finishes it) unless ``allow_partial``; every record must carry the run's settings hash and
every done marker the run's plan. It writes the output (accepted traces), the rejects when
asked, and the union state file, so a later plain ``tracegen run -o OUT`` with the same
settings resumes exactly: each episode once, by the rules `RunFiles` resumes with (a
whole trace in an output or rejects file, or a rejected or failed state line). A last line
a crash cut (or a shard still writes) is ignored. The files are written beside their final
names and renamed into place, so an interrupted merge leaves no half-written output. Its
counts are those of the records it wrote.
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
from tracegen.generate.runfiles import (
    StateHeader,
    StateLine,
    attempted,
    in_use,
    run_rows,
    state_path,
)
from tracegen.generate.shards import (
    Manifest,
    Shard,
    done_path,
    manifest_path,
    parse_shard_file,
    read_done,
    read_manifest,
    shard_file,
)
from tracegen.jsonl import JsonlWriter, iter_lines

_GLOB = set("*?[")
_SIDECARS = (".state", ".done")


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

    def rows(self) -> Iterator[tuple[Path, int, dict[str, Any]]]:
        """Every whole record of the shard (a cut last line left out)."""
        return run_rows(self.output, self.rejects, self.state, whole_lines=True)

    def attempted(self) -> set[Key]:
        """The episodes the shard would skip if it ran again."""
        return {
            _key(path, lineno, row)
            for path, lineno, row in self.rows()
            if not _is_header(path, row, self.state) and attempted(path, row, self.state)
        }

    def torn(self) -> list[Path]:
        """Its files whose last line is cut."""
        return [p for p in (self.output, self.rejects, self.state) if p and _cut(p)]


def _is_header(path: Path, row: dict[str, Any], state: Path) -> bool:
    return path == state and "settings" in row


def _key(path: Path, lineno: int, row: dict[str, Any]) -> Key:
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


# ---------------------------------------------------------------- status


@dataclass(frozen=True)
class ShardState:
    files: ShardFiles
    attempted: int
    total: int
    done: bool
    running: bool

    @property
    def state(self) -> str:
        if self.done:
            return "done"
        if self.running:
            return "running"
        return "stopped" if self.files.state.exists() else "not started"


@dataclass(frozen=True)
class RunStatus:
    manifest: Manifest
    shards: list[ShardState]


def run_status(output: Path) -> RunStatus:
    """How far each shard of the run writing ``output`` is."""
    manifest = read_manifest(manifest_path(output))
    shards = []
    for index in range(manifest.shards):
        files = ShardFiles.of(output, Shard(index, manifest.shards), manifest)
        marker = read_done(files.output)
        shards.append(
            ShardState(
                files=files,
                attempted=len(files.attempted()),
                total=manifest.episodes[index],
                done=marker is not None and _marks(marker.settings_hash, manifest),
                running=in_use(files.state),
            )
        )
    return RunStatus(manifest, shards)


def _marks(settings_hash: str, manifest: Manifest) -> bool:
    return settings_hash == manifest.settings_hash


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

    @property
    def episodes(self) -> int:
        return sum(self.outcomes.values())

    @property
    def partial(self) -> bool:
        return bool(self.not_done or self.missing)


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
        marker = read_done(files.output)
        if marker is not None and not _marks(marker.settings_hash, manifest):
            raise InputFileError(
                f"{done_path(files.output)}: marks a shard of another plan (settings hash "
                f"{marker.settings_hash}, the run's is {manifest.settings_hash}); run the shard "
                "again"
            )
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
    _Writer(targets, manifest, report).write([shards[i] for i in sorted(shards)])
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
    inputs = {p.resolve() for f in shards.values() for p in (f.output, f.rejects, f.state) if p}
    for target in targets:
        if target is None:
            continue
        if target.resolve() in inputs:
            raise ConfigError(f"{target} is one of the shards' files; give another output")
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
        self, targets: tuple[Path, Path | None, Path], manifest: Manifest, report: MergeReport
    ) -> None:
        self.targets = [t for t in targets if t is not None]
        self.manifest = manifest
        self.report = report
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
                settings_hash=self.manifest.settings_hash, settings=self.manifest.settings
            )
            self.state.write(header)
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
        self.report.torn += files.torn()
        pending: dict[Key, dict[str, Any]] = {}
        for path, lineno, row in self._rows(files.state):
            if "settings" not in row and row.get("outcome") != "accepted":
                pending[_key(path, lineno, row)] = row
        for path, lineno, row in self._rows(files.output):
            if self._new(_key(path, lineno, row)):
                self.out.write(row)
                self._state(_state_line(path, lineno, row, "accepted"))
        for path, lineno, row in self._rows(files.rejects):
            key = _key(path, lineno, row)
            if self._new(key):
                if self.rej is not None:
                    self.rej.write(row)
                line = pending.pop(key, None)
                outcome = "failed" if row.get("error") else "rejected"
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
    from rich.console import Console
    from rich.table import Table

    errors = Console(stderr=True, highlight=False, soft_wrap=True)
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
    table = Table(title="tracegen merge", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("shards", f"{len(report.merged)} of {report.shards} merged")
    if report.partial:
        parts = [
            f"{what}: {', '.join(str(i) for i in shards)}"
            for what, shards in (("missing", report.missing), ("not done", report.not_done))
            if shards
        ]
        table.add_row("partial", f"shards {'; '.join(parts)} (--allow-partial)")
    n = report.outcomes
    table.add_row("episodes", f"{report.episodes} of {report.planned} in the plan")
    table.add_row("accepted", f"{n['accepted']} (in {report.output})")
    kept = f" (in {report.rejects})" if report.rejects else ""
    table.add_row("rejected", f"{n['rejected']}{kept}")
    table.add_row("failed", f"{n['failed']}{kept}")
    if report.duplicates:
        table.add_row("duplicates dropped", str(report.duplicates))
    table.add_row("state", str(state_path(report.output)))
    Console(highlight=False).print(table)


def status_command(output: Path) -> None:
    """`tracegen status`: one row per shard."""
    from rich.console import Console
    from rich.table import Table

    status = run_status(output)
    table = Table(title=f"{output}: {status.manifest.shards} shards", title_justify="left")
    for column in ("shard", "episodes", "state", "file"):
        table.add_column(column)
    for s in status.shards:
        table.add_row(str(s.files.shard), f"{s.attempted}/{s.total}", s.state, s.files.output.name)
    attempted = sum(s.attempted for s in status.shards)
    done = sum(s.done for s in status.shards)
    table.add_row("all", f"{attempted}/{sum(status.manifest.episodes)}", f"{done} done", "")
    Console(highlight=False).print(table)
