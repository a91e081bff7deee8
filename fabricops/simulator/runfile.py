"""Run files: a simulated run's telemetry and ground truth, in one stream.

Layout: the magic ``FABRICOPS-RUN1\\n``, then records of ``u8 kind``, ``u32
length`` (little-endian) and a payload. Kinds: 1 header (JSON: scenario,
topology summary, catalogue and codec versions), 2 one tick's frames
(``encode_many``), 3 ground truth (JSON list), 4 summary (JSON). A path
ending in ``.gz`` is gzip-compressed. A file cut short (a killed run) reads
up to its last whole record and then raises ``RunFileError`` saying where.
"""

from __future__ import annotations

import gzip
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from fabricops.core.frame import CODEC_VERSION, Frame, decode_many, encode_many

MAGIC = b"FABRICOPS-RUN1\n"
HEADER, FRAMES, TRUTH, SUMMARY = 1, 2, 3, 4
_REC = struct.Struct("<BI")


class RunFileError(ValueError):
    """A run file that cannot be read; the message names the file and where."""


def _open(path: Path, mode: str) -> IO[bytes]:
    if path.suffix == ".gz":
        return gzip.open(path, mode + "b", compresslevel=1)  # type: ignore[return-value]
    return open(path, mode + "b")


class RunWriter:
    """Writes a run file record by record; use as a context manager."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fh: IO[bytes] | None = None
        self.bytes_written = 0

    def __enter__(self) -> RunWriter:
        self._fh = _open(self.path, "w")
        self._fh.write(MAGIC)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _record(self, kind: int, payload: bytes) -> None:
        if self._fh is None:
            raise RunFileError(f"{self.path}: writer is not open")
        self._fh.write(_REC.pack(kind, len(payload)))
        self._fh.write(payload)
        self.bytes_written += _REC.size + len(payload)

    def header(self, doc: dict[str, Any]) -> None:
        self._record(HEADER, json.dumps({**doc, "codec_version": CODEC_VERSION}).encode())

    def frames(self, frames: list[Frame]) -> None:
        self._record(FRAMES, encode_many(frames))

    def truth(self, items: list[dict[str, Any]]) -> None:
        self._record(TRUTH, json.dumps(items).encode())

    def summary(self, doc: dict[str, Any]) -> None:
        self._record(SUMMARY, json.dumps(doc).encode())


def records(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """Every (kind, payload) of a run file, in order."""
    p = Path(path)
    try:
        with _open(p, "r") as fh:
            if fh.read(len(MAGIC)) != MAGIC:
                raise RunFileError(f"{p}: not a fabricops run file (bad magic)")
            offset = len(MAGIC)
            while head := fh.read(_REC.size):
                if len(head) < _REC.size:
                    raise RunFileError(f"{p}: cut short in a record header at byte {offset}")
                kind, length = _REC.unpack(head)
                payload = fh.read(length)
                if len(payload) < length:
                    raise RunFileError(f"{p}: cut short at byte {offset}: record of "
                                       f"{length} bytes has only {len(payload)}")
                offset += _REC.size + length
                yield kind, payload
    except OSError as exc:
        raise RunFileError(f"{p}: cannot read: {exc}") from None


class RunReader:
    """Convenience access to a whole run file (loads it record by record)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def header(self) -> dict[str, Any]:
        for kind, payload in records(self.path):
            if kind == HEADER:
                doc: dict[str, Any] = json.loads(payload)
                return doc
        raise RunFileError(f"{self.path}: no header record")

    def ticks(self) -> Iterator[list[Frame]]:
        for kind, payload in records(self.path):
            if kind == FRAMES:
                yield decode_many(payload)

    def truth(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = list(self._json(TRUTH))
        return items

    def summary(self) -> dict[str, Any]:
        doc = self._json(SUMMARY)
        return doc if isinstance(doc, dict) else {}

    def _json(self, want: int) -> Any:
        for kind, payload in records(self.path):
            if kind == want:
                return json.loads(payload)
        raise RunFileError(f"{self.path}: no record of kind {want}")
