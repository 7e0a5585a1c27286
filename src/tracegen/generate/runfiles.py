"""The files of a run, written so that any interruption can be resumed exactly.

A run writes three JSONL files:

- the output (``-o``), accepted traces;
- the rejects file (``--rejects``, optional), rejected and failed traces;
- the state file, ``OUTPUT.state`` beside the output: a header with the settings (again
  when they change while the files hold no record), then one line per attempted
  (problem, sample, mode, model) whatever became of it.

Each finished episode is written trace first (output or rejects), state line second,
each line by one append of a whole line. A kill can therefore cut at most the last line
of a file, and between the two writes leaves a trace whose state line is missing. On
start, a cut last line is dropped from every file (`repair_tail`, and the user is told),
and the attempted keys are the union of the output, the rejects file and the state's
rejected lines. An accepted trace counts only if it is whole in the output
(its state line alone does not: the output is the truth for what it holds); a trace
without its state line still counts; a rejected trace kept only in the state counts once
its state line is whole; anything cut is simply run again. So a resumed run neither
duplicates nor skips a sample.

An episode the server, the sandbox or tracegen failed (``failed``: its trace in the
rejects file, its state line) is not attempted in that sense: a resumed run runs it again.
When the run starts writing, `RunFiles.supersede`'s episodes have their failed attempt's
records taken out of the rejects file and the state (each rewritten whole to a temporary
file, then renamed over the old one), so the new attempt's record is the episode's only one
in every file `stats`, `convert` and `merge` read. A crash at any point leaves the episode
to run again: its old records, where they remain, only say it failed.

Every record carries the settings hash; files holding records made with other settings are
refused unless ``--overwrite`` starts all three afresh.
A shard's state header also carries its plan's fingerprint (`PlanFingerprint`): files of a
shard of another plan (other problems, samples, N) are refused the same way.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any, Final, Literal

import orjson
from pydantic import Field, ValidationError

from tracegen.episode.spec import Key
from tracegen.errors import ConfigError, OutputError
from tracegen.generate.plan import PlanFingerprint
from tracegen.grading.filters import Outcome, failed_row
from tracegen.jsonl import (
    JsonlWriter,
    check_outputs,
    dumps,
    iter_lines,
    iter_raw_lines,
    repair_tail,
    special_file,
)
from tracegen.schema import TRACE_SCHEMA, Record, Trace

STATE_SCHEMA: Final = "tracegen.state/1"


class StateHeader(Record):
    """First line of a state file: what shaped the traces, to explain a refusal."""

    schema_: Literal["tracegen.state/1"] = Field(default=STATE_SCHEMA, alias="schema")
    settings_hash: str
    settings: dict[str, Any]
    plan: PlanFingerprint | None = None
    """A shard's plan (`tracegen.generate.shards`); none for a run that is not sharded."""
    run: dict[str, Any] | None = None
    """What the run that wrote the header decided (`tracegen.generate.setup.RunSetup.header`:
    mode, backend kind, model, problem set, a first run's preset…); none in the files of a
    tracegen that did not record it, which resume all the same."""

    def row(self) -> dict[str, Any]:
        """As written: without ``plan`` when there is none."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class StateLine(Record):
    """One attempted episode."""

    schema_: Literal["tracegen.state/1"] = Field(default=STATE_SCHEMA, alias="schema")
    id: str
    problem_id: str
    sample: int
    mode: str
    model: str
    settings_hash: str
    outcome: Outcome


def state_path(output: Path) -> Path:
    """``OUTPUT.state``; ``/dev/null`` for an output that cannot be read back (``-o
    /dev/null``, a FIFO): such a run has nothing to resume, and no business in ``/dev``."""
    if special_file(output):
        return Path(os.devnull)
    return output.with_name(output.name + ".state")


def run_rows(
    output: Path, rejects: Path | None, state: Path, *, whole_lines: bool = False
) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    """(file, line number, object) of every line of a run's files: state, output, rejects."""
    for path in (state, output, rejects):
        if path is not None and path.is_file():
            for lineno, row in iter_lines(path, whole_lines=whole_lines):
                yield path, lineno, row


def attempted(path: Path, row: dict[str, Any], state: Path) -> bool:
    """Whether a record (not a state header) makes its episode attempted: a trace in the
    output or the rejects does; a state line does unless it says accepted (see above)."""
    return path != state or row.get("outcome") != "accepted"


def changed_settings(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The names of the settings that differ, as a user knows them."""
    changed = sorted(k for k in now.keys() | before.keys() if before.get(k) != now.get(k))
    return ["prompt" if k == "prompt_sha256" else k for k in changed]


class _Mismatch(Exception):
    def __init__(self, found: str) -> None:
        self.found = found


class RunFiles:
    """Opens the run's files, knows what was attempted, and records each episode."""

    def __init__(
        self,
        output: Path,
        rejects: Path | None,
        *,
        settings_hash: str,
        settings: dict[str, Any],
        overwrite: bool,
        warn: Callable[[str], None],
        plan: PlanFingerprint | None = None,
        start: bool = True,
    ) -> None:
        self.output = output
        self.rejects = rejects
        self.state = state_path(output)
        self.settings_hash = settings_hash
        self.plan = plan
        check_outputs((), output, rejects)
        for p in (output, rejects):
            if p is not None and p.suffix == ".gz":
                raise ConfigError(
                    f"{p}: run writes plain JSONL; give a name without .gz "
                    "(compress the file once the run is over)"
                )
        kinds = {output: TRACE_SCHEMA, self.state: STATE_SCHEMA}
        if rejects is not None:
            for taken, what in ((output, "the output file"), (self.state, "the run's state file")):
                if rejects.resolve() == taken.resolve():
                    raise ConfigError(f"--rejects {rejects} is {what}; give another file")
            kinds[rejects] = TRACE_SCHEMA
        self._created = [
            p for p in (output, rejects, self.state) if p is not None and not p.exists()
        ]
        """The files this run makes: removed again when it records nothing (`close`)."""
        self.recorded = 0
        self._kinds = kinds
        self._overwrite = overwrite
        self._settings = settings
        self._warn = warn
        self._out: JsonlWriter | None = None
        self._rej: JsonlWriter | None = None
        self._state: JsonlWriter | None = None
        self._lock = _RunLock(self.state, output)
        try:
            _check(kinds, overwrite=overwrite)
            self.done: set[Key] = set()
            self.failed: set[Key] = set()
            """Episodes whose last attempt the server, the sandbox or tracegen failed: not
            done, so run again (`supersede`)."""
            self._superseded: set[Key] = set()
            self._current = False if overwrite else self._scan(settings)
            self.failed -= self.done
            if _is_fifo(output):  # a stream: refused now if no process reads it, kept open
                self._out = JsonlWriter(output)
            if start:
                self.start()
        except BaseException:
            self._lock.release(refused=True)
            raise

    def start(self, run: dict[str, Any] | None = None) -> None:
        """Begin writing: start the files afresh (``overwrite``) or drop a cut last line, and
        record the settings, with what the run decided (``run``, `StateHeader.run`). A run
        calls it once a server has answered, so that a run that reaches none leaves every file
        as it found it."""
        if self._state is not None:
            return
        _prepare(self._kinds, overwrite=self._overwrite, warn=self._warn)
        if self._superseded:
            self._drop(self._superseded)
        if self._out is None:
            self._out = JsonlWriter(self.output)
        self._rej = JsonlWriter(self.rejects) if self.rejects is not None else None
        self._state = JsonlWriter(self.state)
        if not self._current:
            header = StateHeader(
                settings_hash=self.settings_hash, settings=self._settings, plan=self.plan, run=run
            )
            self._state.write(header.row())

    def _scan(self, settings: dict[str, Any]) -> bool:
        """Collect the attempted keys; whether the state's last header is the current one."""
        headers: dict[str, StateHeader] = {}
        last: StateHeader | None = None
        try:
            rows = run_rows(self.output, self.rejects, self.state, whole_lines=True)
            for path, lineno, row in rows:
                if path == self.state and "settings" in row:
                    last = _header(self.state, lineno, row)
                    headers[last.settings_hash] = last
                    self._check_plan(last.plan)
                    continue
                key = self._key(path, lineno, row)
                if row.get("outcome") == "failed" or (path == self.rejects and failed_row(row)):
                    self.failed.add(key)
                elif attempted(path, row, self.state):
                    self.done.add(key)
        except _Mismatch as m:
            raise ConfigError(_refusal(self.output, headers.get(m.found), settings)) from None
        return (
            last is not None and last.settings_hash == self.settings_hash and last.plan == self.plan
        )

    def _check_plan(self, found: PlanFingerprint | None) -> None:
        if found is None or self.plan is None or found == self.plan:
            return
        differences = "; ".join(self.plan.differences(found, there="in its files"))
        raise ConfigError(
            f"{self.output} holds a shard of another plan ({differences}); run again with "
            "--overwrite to start this shard afresh, or give a new --output"
        )

    def _key(self, path: Path, lineno: int, row: dict[str, Any]) -> Key:
        try:
            key = (str(row["problem_id"]), int(row["sample"]), str(row["mode"]), str(row["model"]))
        except (KeyError, TypeError, ValueError):
            raise ConfigError(
                f"{path}:{lineno}: not a tracegen record (left as it was); give another file"
            ) from None
        self._check(str(row.get("settings_hash", "")))
        return key

    def _check(self, found: str) -> None:
        if found != self.settings_hash:
            raise _Mismatch(found)

    def supersede(self, keys: Collection[Key]) -> int:
        """Run these failed episodes again: their records are taken out of the rejects file
        and the state when the run starts writing (`start`; see the module docstring). How
        many episodes that is."""
        if self._state is not None:
            raise RuntimeError("supersede before the files are started")
        self._superseded = set(keys) & self.failed
        return len(self._superseded)

    def _drop(self, keys: set[Key]) -> None:
        def kept(row: dict[str, Any]) -> bool:
            return (
                "settings" in row
                or (
                    str(row.get("problem_id")),
                    row.get("sample"),
                    str(row.get("mode")),
                    str(row.get("model")),
                )
                not in keys
            )

        if self.rejects is not None and not special_file(self.rejects) and self.rejects.exists():
            _rewrite(self.rejects, kept).replace(self.rejects)
        if not special_file(self.state) and self.state.exists():
            self._lock.adopt(_rewrite(self.state, kept))

    def record(self, trace: Trace, outcome: Outcome, line: bytes | None = None) -> None:
        """Write the trace where it belongs, then its state line (see the module docstring).
        ``line``: the trace as `tracegen.jsonl.dumps` wrote it already (on a Ray actor)."""
        self.start()
        assert self._out is not None and self._state is not None
        target = self._out if outcome == "accepted" else self._rej
        if target is not None:
            target.write_line(line if line is not None else dumps(trace.to_row()))
        self._state.write(
            StateLine(
                id=trace.id,
                problem_id=trace.problem_id,
                sample=trace.sample,
                mode=trace.mode,
                model=trace.model,
                settings_hash=trace.settings_hash,
                outcome=outcome,
            )
        )
        self.done.add(trace.key)
        self.recorded += 1

    def close(self) -> None:
        """Close the files; those this run made are removed when it recorded nothing (no
        server answered, nothing to do, an interrupt before the first episode ended)."""
        for w in (self._out, self._rej, self._state):
            if w is not None:
                w.close()
        if self.recorded == 0:
            for path in self._created:
                with contextlib.suppress(OSError):
                    path.unlink()
        self._lock.release()


class _RunLock:
    """An exclusive `flock` on the state file while a run uses its files: the same command
    started twice at once is refused instead of running every episode twice. The kernel
    drops the lock when the process ends, so a kill -9 never leaves a stale one."""

    def __init__(self, state: Path, output: Path) -> None:
        self._path = state
        self._created = not state.exists()
        self._fd = -1
        if special_file(state):  # nothing to resume, nothing to guard: `state_path`
            return
        try:
            state.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(state, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise OutputError(f"{state}: cannot open: {e.strerror}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise OutputError(
                f"{output} is being written by another tracegen run; "
                "wait for it to end or give another --output"
            ) from None

    def adopt(self, replacement: Path) -> None:
        """Rename ``replacement`` over the state file, locked before it takes the name: no
        other run can take the file in between."""
        fd = os.open(replacement, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
        try:
            replacement.replace(self._path)
        except OSError as e:
            os.close(fd)
            raise OutputError(f"{self._path}: cannot replace: {e.strerror}") from None
        os.close(self._fd)
        self._fd = fd

    def release(self, *, refused: bool = False) -> None:
        """Unlock; a state file this run created and then refused to use is removed."""
        if self._fd < 0:
            return
        if refused and self._created:
            with contextlib.suppress(OSError):
                if self._path.stat().st_size == 0:
                    self._path.unlink()
        os.close(self._fd)
        self._fd = -1


def in_use(state: Path) -> bool:
    """Whether a run is writing the files of this state file now (it holds the lock)."""
    try:
        fd = os.open(state, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _refusal(output: Path, before: StateHeader | None, settings: dict[str, Any]) -> str:
    what = "other settings"
    if before is not None:
        changed = changed_settings(before.settings, settings)
        if changed:
            what = f"other settings (changed: {', '.join(changed)})"
    return (
        f"{output} holds traces made with {what}; run again with --overwrite to start "
        "afresh, or give a new --output"
    )


def _header(path: Path, lineno: int, row: dict[str, Any]) -> StateHeader:
    try:
        return StateHeader.model_validate(row)
    except ValidationError:
        raise ConfigError(f"{path}:{lineno}: not a tracegen state header") from None


def _check(kinds: dict[Path, str], *, overwrite: bool) -> None:
    """Refuse, before touching anything, a directory or (unless ``overwrite``) a file that is
    not ours."""
    for p in kinds:
        if p.is_dir():
            raise OutputError(f"{p}: is a directory")
    if not overwrite:
        for p, schema in kinds.items():
            if not special_file(p):
                _ensure_ours(p, schema)


def _prepare(kinds: dict[Path, str], *, overwrite: bool, warn: Callable[[str], None]) -> None:
    """Start the files afresh, or drop a cut last line."""
    for p in kinds:
        if special_file(p):  # nothing to resume
            continue
        if overwrite:
            _truncate(p)
        else:
            _repair(p, warn)


def _ensure_ours(path: Path, schema: str) -> None:
    """Refuse, before touching it, a file whose first line is not a tracegen record."""
    prefix = b'{"schema":"' + schema.encode() + b'"'
    try:
        with path.open("rb") as fh:
            head = fh.read(len(prefix))
    except FileNotFoundError:
        return
    except OSError as e:
        raise OutputError(f"{path}: cannot open: {e.strerror}") from None
    if not prefix.startswith(head):
        what = "state" if schema == STATE_SCHEMA else "trace"
        raise ConfigError(f"{path}: not a tracegen {what} file (left as it was); give another file")


def _rewrite(path: Path, keep: Callable[[dict[str, Any]], bool]) -> Path:
    """A copy of ``path`` beside it holding the lines ``keep`` keeps, byte for byte, on disk."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as fh:
            for _, raw in iter_raw_lines(path):
                if keep(orjson.loads(raw)):
                    fh.write(raw if raw.endswith(b"\n") else raw + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot rewrite: {e.strerror}") from None
    return tmp


def _repair(path: Path, warn: Callable[[str], None]) -> None:
    try:
        dropped = repair_tail(path)
    except OSError as e:
        raise OutputError(f"{path}: cannot open: {e.strerror}") from None
    if dropped:
        warn(f"{path}: dropped an incomplete last line ({dropped} bytes) left by a crash")


def _truncate(path: Path) -> None:
    try:
        if path.exists():
            path.open("wb").close()
    except OSError as e:
        raise OutputError(f"{path}: cannot overwrite: {e.strerror}") from None


def _is_fifo(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(path.stat().st_mode)
    except OSError:
        return False
