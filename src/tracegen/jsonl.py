"""The one JSONL reader and writer: orjson, whole lines, crash-safe tail repair.

Two ways in: `iter_lines`/`iter_records` give every line as a dict or a pydantic model;
`iter_structs` decodes lines straight into lean msgspec structs, in blocks of lines, so a
reader that needs a few fields of each line never builds the others (a trace's logprobs are
most of its bytes). `line_spans` cuts a file into ranges that separate processes can read.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import itertools
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar, cast

import msgspec
import orjson

from tracegen.errors import ConfigError, InputFileError, JsonlError, OutputError

if TYPE_CHECKING:
    from pydantic import BaseModel

Row = dict[str, Any]
M = TypeVar("M", bound="BaseModel")
S = TypeVar("S")

MB = 1 << 20
DEFAULT_MAX_LINE_BYTES = 64 * MB
MAX_LINE_ENV = "TRACEGEN_MAX_LINE_BYTES"
_PIECE = MB
BLOCK_BYTES = 1 << 21
"""Bytes `iter_structs` reads and decodes at once (whole lines are added to reach a newline)."""

LineErrorHandler = Callable[[int, str], None]
"""Called with the number of a line that could not be read and why (no FILE:LINE prefix)."""

_AT = re.compile(r"^(?P<msg>.*) - at `\$\.?(?P<path>.*)`$")
_MISSING = re.compile(r"^object missing required field `(?P<field>[^`]*)`$")
_NOT_OBJECT = re.compile(r"^expected `object`, got `(?P<got>[^`]*)`$")


def _short(err: Exception) -> str:
    from pydantic import ValidationError

    if isinstance(err, ValidationError):
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        return f"{where}: {first['msg']}"
    return str(err).splitlines()[0]


def open_binary(path: Path, *, buffered: bool = True) -> IO[bytes]:
    """``path`` for reading, uncompressed; ``buffered=False`` for reads of large blocks."""
    kind = special_file(path)
    if kind in ("a character device", "a block device"):  # /dev/zero: endless, no newline
        raise InputFileError(f"{path}: is {kind}, not a JSONL file")
    try:
        if path.suffix == ".gz":
            return cast("IO[bytes]", gzip.open(path, "rb"))
        return path.open("rb", buffering=-1 if buffered else 0)
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: is a directory, not a JSONL file") from None
    except PermissionError:
        raise InputFileError(f"{path}: permission denied") from None


def max_line_bytes() -> int:
    """The longest line a reader decodes: ``TRACEGEN_MAX_LINE_BYTES``, 64 MB by default."""
    value = os.environ.get(MAX_LINE_ENV, "").strip()
    if not value:
        return DEFAULT_MAX_LINE_BYTES
    try:
        cap = int(value)
    except ValueError:
        cap = 0
    if cap < 1:
        raise ConfigError(
            f"{MAX_LINE_ENV} (environment): expected a number of bytes, not {value!r}"
        )
    return cap


def _size(n: int) -> str:
    return f"{n / MB:.3g} MB" if n >= MB else f"{n:,} bytes"


def read_line(fh: IO[bytes], cap: int) -> bytes | int:
    """The next line of ``fh`` (``b""`` at the end), or the length of a line longer than
    ``cap`` bytes (newline excluded): that one is skipped 1 MB at a time, never held whole."""
    raw = fh.readline(_PIECE)
    if len(raw) <= cap and (len(raw) < _PIECE or raw.endswith(b"\n")):
        return raw
    pieces: list[bytes] = [raw] if len(raw) <= cap + 1 else []
    size = len(raw)
    while len(raw) == _PIECE and not raw.endswith(b"\n"):
        raw = fh.readline(_PIECE)
        size += len(raw)
        if size <= cap + 1:
            pieces.append(raw)
        else:
            pieces.clear()
    length = size - raw.endswith(b"\n")
    return length if length > cap else b"".join(pieces)


def iter_lines(
    path: str | Path,
    *,
    on_error: Callable[[JsonlError], None] | None = None,
    whole_lines: bool = False,
) -> Iterator[tuple[int, Row]]:
    """Yield ``(line_number, object)`` for each non-blank line, lazily.

    A line that is not a JSON object, or is longer than `max_line_bytes`, raises `JsonlError`
    naming ``FILE:LINE``, or is passed to ``on_error`` and skipped when a callback is given.
    With ``whole_lines``, a last line without its newline (cut by a crash, or still being
    written) is left out.
    """
    path = Path(path)
    for lineno, raw in iter_raw_lines(path, on_error=on_error, whole_lines=whole_lines):
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            err = JsonlError(f"{path}:{lineno}: not valid JSON ({_short(e)})")
        else:
            if isinstance(obj, dict):
                yield lineno, obj
                continue
            err = JsonlError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        if on_error is None:
            raise err
        on_error(err)


def iter_raw_lines(
    path: str | Path,
    *,
    on_error: Callable[[JsonlError], None] | None = None,
    whole_lines: bool = False,
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, bytes)`` for each non-blank line, lazily, undecoded."""
    for lineno, _, raw in iter_raw_lines_at(path, on_error=on_error, whole_lines=whole_lines):
        yield lineno, raw


def iter_raw_lines_at(
    path: str | Path,
    *,
    on_error: Callable[[JsonlError], None] | None = None,
    whole_lines: bool = False,
) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(line_number, byte_offset, bytes)`` for each non-blank line, undecoded: for
    passes that decode a few fields and copy kept lines byte for byte. A line longer than
    `max_line_bytes` is never held whole: it raises `JsonlError` naming ``FILE:LINE``, or
    goes to ``on_error`` and is skipped. With ``whole_lines``, a last line without its newline
    is left out."""
    path = Path(path)
    cap = max_line_bytes()
    with open_binary(path) as fh:
        lineno = offset = 0
        while True:
            try:
                raw = read_line(fh, cap)
            except (OSError, EOFError) as e:
                raise InputFileError(f"{path}: cannot read: {e}") from None
            if not raw or (whole_lines and isinstance(raw, bytes) and not raw.endswith(b"\n")):
                return
            lineno += 1
            start = offset
            if isinstance(raw, int):
                offset += raw + 1
                err = JsonlError(f"{path}:{lineno}: {too_long(raw, cap)}")
                if on_error is None:
                    raise err
                on_error(err)
                continue
            offset += len(raw)
            if not raw.isspace():
                yield lineno, start, raw


def too_long(size: int, cap: int) -> str:
    """Why a line of ``size`` bytes was not read."""
    return f"line of {_size(size)} exceeds the {_size(cap)} cap ({MAX_LINE_ENV})"


def iter_records(
    path: str | Path,
    model: type[M],
    *,
    on_error: Callable[[JsonlError], None] | None = None,
) -> Iterator[tuple[int, M]]:
    """Like `iter_lines`, validating each object as ``model``; schema errors name FILE:LINE."""
    for lineno, obj in iter_lines(path, on_error=on_error):
        try:
            record = validate(obj, model, path, lineno)
        except JsonlError as err:
            if on_error is None:
                raise
            on_error(err)
            continue
        yield lineno, record


def validate(
    obj: Row | bytes, model: type[M], path: str | Path, lineno: int, *, name: str | None = None
) -> M:
    """``obj`` (a dict or a JSON line read from ``path`` at ``lineno``) as ``model``;
    `JsonlError` names FILE:LINE and the record (``name``, or the model's)."""
    from pydantic import ValidationError

    try:
        if isinstance(obj, bytes):
            return model.model_validate_json(obj)
        return model.model_validate(obj)
    except ValidationError as e:
        if isinstance(obj, bytes) and e.errors()[0]["type"] == "json_invalid":
            raise JsonlError(f"{path}:{lineno}: not valid JSON ({_short(e)})") from None
        what = name or model.__name__
        raise JsonlError(f"{path}:{lineno}: not a valid {what}: {_short(e)}") from None


def dumps(record: BaseModel | Row) -> bytes:
    """One JSON line, newline included. A row may hold msgspec structs: each is dumped as
    its JSON object as it is reached."""
    if not isinstance(record, dict):
        record = record.model_dump(mode="json", by_alias=True)
    return orjson.dumps(record, default=_struct, option=orjson.OPT_APPEND_NEWLINE)


def _struct(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    raise TypeError(f"a {type(value).__name__} is not a JSON value")


# ---------------------------------------------------------------- typed structs, in blocks


def line_spans(path: str | Path, size: int) -> list[tuple[int, int | None]]:
    """``path`` cut into byte ranges ``(start, end)`` of about ``size`` bytes, each holding
    whole lines; the last one ends at the end of the file (``None``). A gzip file cannot be
    entered in the middle and is one range."""
    path = Path(path)
    starts = [0]
    with open_binary(path) as fh:
        total = 0 if path.suffix == ".gz" else os.fstat(fh.fileno()).st_size
        while starts[-1] + size < total:
            fh.seek(starts[-1] + size - 1)
            read_line(fh, 0)  # to the next line, 1 MB at a time however long this one is
            if fh.tell() >= total:
                break
            starts.append(fh.tell())
    return [*itertools.pairwise(starts), (starts[-1], None)]


class Block(NamedTuple, Generic[S]):
    """Lines read by `iter_struct_blocks`: how many, their structs (bad and blank lines left
    out), and the byte offset in the file of each struct's line."""

    lines: int
    items: list[S]
    offsets: list[int]


def iter_struct_blocks(
    path: str | Path,
    decoder: msgspec.json.Decoder[S],
    *,
    on_error: LineErrorHandler,
    name: str = "record",
    span: tuple[int, int | None] = (0, None),
    offsets: bool = True,
) -> Iterator[Block[S]]:
    """The lines of ``path`` (of the byte range ``span``, see `line_spans`) decoded by
    ``decoder``, a msgspec JSON decoder of the struct the caller needs (fields it does not
    name are skipped, never built), a `Block` at a time.

    Blank lines are skipped. A block holding a bad line is decoded again line by line: each
    bad line is passed to ``on_error`` with its number (counted from the start of ``span``)
    and the reason (``not valid JSON (…)``, ``not a {name}: field: …``), and left out.
    Blocks are read into one reused buffer, so a `msgspec.Raw` field of a struct is only
    valid until the next block is asked for (``bytes(raw)`` keeps a copy). Without
    ``offsets``, a block's ``offsets`` are left empty (its lines are counted, not found).
    """
    path = Path(path)
    seen, position = 0, span[0]
    cap = max_line_bytes()
    with open_binary(path, buffered=False) as fh:
        for buf, size in _line_blocks(path, cast("io.RawIOBase", fh), *span, cap=cap):
            if buf is None:  # one line over the cap, skipped unread
                seen += 1
                on_error(seen, too_long(size, cap))
                position += size + 1
                yield Block(1, [], [])
                continue
            lines = buf.count(b"\n", 0, size - 1) + 1
            block = memoryview(buf)[:size]
            try:
                items = decoder.decode_lines(block)
            except msgspec.MsgspecError:
                items = []
            if len(items) == lines:  # no bad line, no blank one
                at = [position + start for start in _line_starts(buf, size)] if offsets else []
            else:
                decoded = list(_decode_each(bytes(block), decoder, seen, on_error, name))
                items = [item for _, item in decoded]
                at = []
                if offsets:
                    starts = _line_starts(buf, size)
                    at = [position + starts[index] for index, _ in decoded]
            seen += lines
            position += size
            yield Block(lines, items, at)


def _line_starts(buf: bytearray, size: int) -> list[int]:
    """Where each line of the first ``size`` bytes of ``buf`` starts (a find per line:
    faster than splitting for lines of a few hundred bytes and more)."""
    starts = [0]
    at = buf.find(b"\n", 0, size - 1)
    while at >= 0:
        starts.append(at + 1)
        at = buf.find(b"\n", at + 1, size - 1)
    return starts


def _line_blocks(
    path: Path,
    fh: io.RawIOBase | io.BufferedIOBase,
    start: int,
    end: int | None,
    *,
    cap: int,
) -> Iterator[tuple[bytearray | None, int]]:
    """Whole lines from ``start`` to ``end`` (or the end of the file) as ``(buffer, size)``:
    the first ``size`` bytes of ``buffer``, which is refilled for the next block. A line
    longer than ``cap`` is skipped as it is read and comes as ``(None, its length)``."""
    buf = bytearray(BLOCK_BYTES)
    filled = 0
    left = None if end is None else end - start
    try:
        if start:
            fh.seek(start)
        while True:
            room = len(buf) - filled if left is None else min(len(buf) - filled, left)
            n = fh.readinto(memoryview(buf)[filled : filled + room]) if room else 0
            total = filled + n
            if not n:
                if total:
                    yield buf, total
                return
            if left is not None:
                left -= n
            cut = buf.rfind(b"\n", 0, total) + 1
            if not cut and total > cap:
                size, filled, left = _skip_line(fh, buf, total, left)
                yield None, size
                continue
            if not cut:
                if total == len(buf):  # grow, but never past what the cap needs
                    buf = buf + bytes(min(len(buf), cap + 1 - len(buf)))
                filled = total
                continue
            yield buf, cut
            filled = total - cut
            memoryview(buf)[:filled] = memoryview(buf)[cut:total]
    except (OSError, EOFError) as e:
        raise InputFileError(f"{path}: cannot read: {e}") from None


def _skip_line(
    fh: io.RawIOBase | io.BufferedIOBase, buf: bytearray, total: int, left: int | None
) -> tuple[int, int, int | None]:
    """Read past the rest of a line whose first ``total`` bytes fill ``buf``: its length, and
    how much of what follows it is left at the start of ``buf`` (and of the span)."""
    size = total
    while True:
        room = len(buf) if left is None else min(len(buf), left)
        n = fh.readinto(memoryview(buf)[:room]) if room else 0
        if not n:
            return size, 0, left
        if left is not None:
            left -= n
        at = buf.find(b"\n", 0, n)
        if at >= 0:
            rest = n - at - 1
            memoryview(buf)[:rest] = memoryview(buf)[at + 1 : n]
            return size + at, rest, left
        size += n


def _decode_each(
    block: bytes,
    decoder: msgspec.json.Decoder[S],
    first: int,
    on_error: LineErrorHandler,
    name: str,
) -> Iterator[tuple[int, S]]:
    """Each good line of ``block`` as ``(its index in the block, struct)``."""
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    for index, raw in enumerate(lines):
        if not raw or raw.isspace():
            continue
        try:
            yield index, decoder.decode(raw)
        except msgspec.MsgspecError as e:
            on_error(first + index + 1, explain(e, name))


def explain(err: msgspec.MsgspecError, name: str = "record") -> str:
    """A msgspec decoding error as the reason part of a FILE:LINE message."""
    if not isinstance(err, msgspec.ValidationError):
        return f"not valid JSON ({err})"
    where, text = located(err)
    missing = _MISSING.match(text)
    if missing:
        field = missing["field"]
        return f"not a {name}: {f'{where}.{field}' if where else field}: missing"
    not_object = _NOT_OBJECT.match(text)
    if not_object and not where:
        return f"expected a JSON object, got {not_object['got']}"
    return f"not a {name}: {where or 'record'}: {text}"


def located(err: msgspec.ValidationError) -> tuple[str, str]:
    """Where a msgspec validation error is (``[3].logprob``, empty at the top) and what it
    says there, lower-cased (``expected `float`, got `str```)."""
    text, where = str(err), ""
    at = _AT.match(text)
    if at:
        text, where = at["msg"], at["path"]
    return where, text[:1].lower() + text[1:]


def repair_tail(path: str | Path) -> int:
    """Drop a last line cut by a crash (one without its newline). Return bytes dropped."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with path.open("rb+") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        block = 1 << 16
        pos = size
        keep = 0
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                keep = start + nl + 1
                break
            pos = start
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    return size - keep


_SPECIAL = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
}


def special_file(path: str | Path) -> str | None:
    """What ``path`` is (``"a FIFO"``…) when it exists and is neither a file nor a folder."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return _SPECIAL.get(stat.S_IFMT(mode))


def special_file_warning(path: str | Path) -> str | None:
    """The warning for an output that is not a regular file (``-o /dev/null``), or None."""
    kind = special_file(path)
    if kind is None:
        return None
    return f"{path} is {kind}, not a regular file: what is written there cannot be read back"


NAME_MAX = 255
"""Bytes in one name of a path, on every file system tracegen writes to."""


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def check_outputs(
    inputs: Iterable[str | Path], *outputs: Path | None, folder: bool = False
) -> None:
    """No output overwrites one of ``inputs`` (the same file under any name: a link, ``./``,
    a hard link), lies above one when ``folder`` (a dataset folder is replaced whole), nor
    has a name no file system holds: each a `ConfigError`."""
    sources = [Path(i) for i in inputs]
    for output in outputs:
        if output is None:
            continue
        name = os.fsencode(output)
        longest = max((len(part) for part in name.split(b"/")), default=0)
        if longest > NAME_MAX or len(name) >= os.pathconf("/", "PC_PATH_MAX"):
            shown = os.fsdecode(name[:60])
            raise ConfigError(f"{shown}…: output name too long (at most {NAME_MAX} bytes a name)")
        for source in sources:
            if _same(output, source):
                raise ConfigError(f"{source}: output would overwrite the input (as {output})")
            if folder and output.resolve() in source.resolve().parents:
                raise ConfigError(f"{source}: output {output} would replace the input's folder")


class JsonlWriter:
    """Append whole records to a JSONL file, one ``write`` per line, flushed each time.

    If a write fails part-way (disk full, file size limit), the partial line is cut off
    again so the file stays valid, and `OutputError` is raised. A FIFO is written as a
    stream; one that no process reads is an error rather than a wait.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, flags, 0o644)
        except OSError as e:
            if e.errno == errno.ENXIO:
                raise OutputError(f"{self.path}: a FIFO that no process reads") from None
            raise OutputError(f"{self.path}: cannot open for writing: {e.strerror}") from None
        os.set_blocking(self._fd, True)
        self._regular = stat.S_ISREG(os.fstat(self._fd).st_mode)

    def write(self, record: BaseModel | Row) -> None:
        self.write_line(dumps(record))

    def write_line(self, line: bytes) -> None:
        """Append one record already dumped by `dumps` (newline included)."""
        start = os.lseek(self._fd, 0, os.SEEK_END) if self._regular else -1
        try:
            view = memoryview(line)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            if self._fsync:
                os.fsync(self._fd)
        except OSError as e:
            if start >= 0:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, start)
            raise OutputError(f"{self.path}: cannot write: {e.strerror or e}") from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
