"""Keyframe payloads taken apart and put back together, for tests of malformed bytes."""

from __future__ import annotations

import struct
import zlib

import zstandard

T0 = 1_767_225_600_000_000_000
SECOND = 1_000_000_000
U64_MAX = 2**64 - 1


def rewrap(payload: bytes, body: bytes) -> bytes:
    """``payload``'s header around another body, with valid lengths and checksums."""
    magic, version, flags, n_series, n_points, _, _ = struct.unpack_from("<4sBBIIII", payload)
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(body)
    head = struct.pack("<4sBBIIII", magic, version, flags, n_series, n_points, len(body),
                       len(frame))
    return head + struct.pack("<I", zlib.crc32(head)) + frame


def body_of(payload: bytes) -> bytes:
    """The decompressed body of a payload (after its 26-byte header)."""
    return zstandard.ZstdDecompressor().decompress(payload[26:])
