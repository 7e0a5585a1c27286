"""Built programs kept on disk, so another process (a second ``tracegen verify``, the next
run) reuses them instead of compiling again.

An entry is named by the build's key (`tracegen.sandbox.programs.Programs.key`: the hash of
the language, the compiler's command and identity, and the source) and holds a header line
(the key again, the main class, the SHA-256 of the binary) and the binary. The directory,
``$XDG_CACHE_HOME/tracegen/builds`` (``~/.cache/tracegen/builds``), is written by tracegen's
own process only, never by the sandbox: it is used only where no execution can write there
(executions run under uids of their own as root; bubblewrap or Landlock confine them
otherwise; rlimit-only without root shares tracegen's uid, so it gets no disk cache). It
must be tracegen's user's and writable by no one else; an entry that does not match its
name, its digest or its owner is ignored. Removing the directory clears it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Final

import orjson

from tracegen.sandbox.isolation import builtin_layers, running_as_root

ENTRY_LIMIT: Final = 64 << 20
"""The largest binary kept (as large as a compilation may produce)."""


def default_dir() -> Path:
    """Where built programs are kept: ``$XDG_CACHE_HOME/tracegen/builds``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tracegen" / "builds"


def sealed_from_executions(isolation: str) -> bool:
    """Whether no execution under ``isolation`` can write in tracegen's user's files."""
    if running_as_root():
        return True  # every execution runs under an unprivileged uid of its own
    if isolation == "bwrap":
        return True  # it sees the system read-only and a /tmp of its own
    if isolation == "builtin":
        return builtin_layers().landlock > 0  # writes in its own directory only
    return False


class BuildCache:
    """Built programs on disk under ``root`` (created 0700 if missing)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hits = 0

    @classmethod
    def for_isolation(cls, isolation: str, root: Path | None = None) -> BuildCache | None:
        """The cache where executions under ``isolation`` cannot write it, else None."""
        if not sealed_from_executions(isolation):
            return None
        cache = cls(root or default_dir())
        return cache if cache._usable() else None

    def _usable(self) -> bool:
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = os.stat(self.root, follow_symlinks=False)
        except OSError:
            return False
        return _ours(info) and stat.S_ISDIR(info.st_mode)

    def get(self, key: str) -> tuple[bytes, str | None] | None:
        """The binary and main class kept for ``key``, if an entry is there and intact."""
        try:
            fd = os.open(self.root / key, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not _ours(info) or not stat.S_ISREG(info.st_mode):
                return None
            if info.st_size > ENTRY_LIMIT + 4096:
                return None
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read()
        except OSError:
            return None
        finally:
            os.close(fd)
        head, _, binary = data.partition(b"\n")
        try:
            header = orjson.loads(head)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(header, dict) or header.get("key") != key:
            return None
        if header.get("sha256") != hashlib.sha256(binary).hexdigest():
            return None
        main = header.get("main")
        self.hits += 1
        return binary, main if isinstance(main, str) else None

    def put(self, key: str, binary: bytes, main: str | None) -> None:
        """Keep ``binary`` for ``key`` (atomically: a reader sees the whole entry or none)."""
        if len(binary) > ENTRY_LIMIT or not self._usable():
            return
        header = {"key": key, "main": main, "sha256": hashlib.sha256(binary).hexdigest()}
        with contextlib.suppress(OSError):
            fd, temporary = tempfile.mkstemp(dir=self.root, prefix=".incoming-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(orjson.dumps(header) + b"\n" + binary)
                os.replace(temporary, self.root / key)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise


def _ours(info: os.stat_result) -> bool:
    """Owned by this process's user and writable by nobody else."""
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
