"""Where `tracegen convert` writes: a JSONL file, a Parquet file, a Hugging Face dataset.

Every output takes the same batches of records in one pass over the traces, and each
batch is turned into an Arrow table once for all the outputs that want one. Nothing holds
more than a batch, so memory stays flat as the input grows. The Hugging Face dataset is
written in place as its one Arrow shard plus the two small JSON files `load_from_disk`
reads, never built in a cache and copied (copying reads the whole dataset back through a
memory map, which shows up as resident memory the size of the dataset).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from tracegen.errors import MissingExtraError
from tracegen.export.builder import Row
from tracegen.jsonl import JsonlWriter

if TYPE_CHECKING:
    import pyarrow as pa
    from datasets import Features

OutputKind = Literal["jsonl", "parquet", "hf"]
HF_SHARD = "data-00000-of-00001.arrow"


class Batch:
    """Records converted together; ``table`` is built the first time an output asks."""

    def __init__(self, rows: list[Row], features: Callable[[], Features]) -> None:
        self.rows = rows
        self._features = features

    @cached_property
    def table(self) -> pa.Table:
        import pyarrow as pa

        return pa.Table.from_pylist(self.rows, schema=self._features().arrow_schema)


class Output(Protocol):
    arrow: ClassVar[bool]
    """Whether it writes Arrow tables (it is given the format's features, and batches are
    as large as the format makes them); else records one by one."""

    def __init__(self, path: Path, feats: Features | None) -> None: ...

    def write(self, batch: Batch) -> None: ...

    def close(self) -> None:
        """Finish the file (called once every batch is written)."""


class JsonlOutput:
    arrow: ClassVar[bool] = False

    def __init__(self, path: Path, feats: Features | None) -> None:
        self._writer = JsonlWriter(path)

    def write(self, batch: Batch) -> None:
        for row in batch.rows:
            self._writer.write(row)

    def close(self) -> None:
        self._writer.close()


class ParquetOutput:
    arrow: ClassVar[bool] = True

    def __init__(self, path: Path, feats: Features | None) -> None:
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise MissingExtraError("--parquet needs pyarrow: pip install pyarrow") from None
        assert feats is not None
        self._writer = pq.ParquetWriter(path, feats.arrow_schema)

    def write(self, batch: Batch) -> None:
        self._writer.write_table(batch.table)

    def close(self) -> None:
        self._writer.close()


class HfOutput:
    """A folder that ``datasets.load_from_disk`` opens, written as the records come."""

    arrow: ClassVar[bool] = True

    def __init__(self, path: Path, feats: Features | None) -> None:
        from datasets.arrow_writer import ArrowWriter

        path.mkdir(parents=True)
        self._path = path
        self._writer = ArrowWriter(features=feats, path=str(path / HF_SHARD))

    def write(self, batch: Batch) -> None:
        self._writer.write_table(batch.table)

    def close(self) -> None:
        import datasets

        self._writer.finalize()
        dataset = datasets.Dataset.from_file(str(self._path / HF_SHARD))
        # What `Dataset.save_to_disk` writes beside its shards, for one shard.
        state: dict[str, Any] = {
            "_data_files": [{"filename": HF_SHARD}],
            "_fingerprint": dataset._fingerprint,
            "_format_columns": None,
            "_format_kwargs": {},
            "_format_type": None,
            "_output_all_columns": False,
            "_split": None,
        }
        info = asdict(dataset.info)
        del dataset
        with (self._path / "state.json").open("w", encoding="utf-8") as fh:
            json.dump(state, fh, indent=2, sort_keys=True)
        with (self._path / "dataset_info.json").open("w", encoding="utf-8") as fh:
            json.dump({key: info[key] for key in sorted(info)}, fh, indent=2)


OUTPUTS: dict[OutputKind, type[Output]] = {
    "jsonl": JsonlOutput,
    "parquet": ParquetOutput,
    "hf": HfOutput,
}
"""Each output by kind (``-o``, ``--parquet``, ``--to-hf``)."""
