"""`tracegen status`: how far each shard of a sharded run is (see `tracegen.generate.shards`
for the files a shard writes). A shard whose done marker or state names another plan is
refused, as `merge` refuses it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tracegen.errors import InputFileError
from tracegen.generate.runfiles import in_use
from tracegen.generate.shards import (
    Manifest,
    Shard,
    ShardFiles,
    manifest_path,
    read_done,
    read_manifest,
)


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

    @property
    def attempted(self) -> int:
        return sum(s.attempted for s in self.shards)

    @property
    def planned(self) -> int:
        return sum(self.manifest.episodes)


def run_status(output: Path) -> RunStatus:
    """How far each shard of the run writing ``output`` is."""
    manifest = read_manifest(manifest_path(output))
    shards = []
    for index in range(manifest.shards):
        files = ShardFiles.of(output, Shard(index, manifest.shards), manifest)
        foreign = files.foreign(manifest)
        if foreign is not None:
            raise InputFileError(foreign)
        shards.append(
            ShardState(
                files=files,
                attempted=len(files.attempted()),
                total=manifest.episodes[index],
                done=read_done(files.output) is not None,
                running=in_use(files.state),
            )
        )
    return RunStatus(manifest, shards)


def status_command(output: Path) -> None:
    """`tracegen status`: one row per shard, the totals, and whether the run is complete."""

    from tracegen.terminal import console as safe_console
    from tracegen.terminal import text_table, untrusted

    status = run_status(output)
    title = untrusted(f"{output}: {status.manifest.shards} shards")
    table = text_table(title=title, title_justify="left")
    for column in ("shard", "episodes", "state", "file"):
        table.add_column(column)
    for s in status.shards:
        row = (str(s.files.shard), f"{s.attempted}/{s.total}", s.state, s.files.output.name)
        table.add_row(*map(untrusted, row))
    done = sum(s.done for s in status.shards)
    table.add_row("all", f"{status.attempted}/{status.planned}", f"{done} done", "")
    console = safe_console(highlight=False)
    console.print(table)
    if done < len(status.shards) or status.attempted < status.planned:
        console.print(
            f"partial: {status.attempted} of {status.planned} episodes attempted, "
            f"{len(status.shards) - done} of {len(status.shards)} shards not done",
            markup=False,
        )
    else:
        console.print("complete: every shard is done; merge them with tracegen merge", markup=False)
