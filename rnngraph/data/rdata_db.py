"""Reader for R lazy-load databases: an index ``NAME.rdx`` and records ``NAME.rdb``.

R packages keep their data sets this way (``pkg/data/Rdata.rdx`` + ``Rdata.rdb``).

- The ``.rdx`` index is one R serialization, gzip-compressed as ``saveRDS`` writes it
  (bzip2, xz, or a record as below are accepted too), of
  ``list(variables = list(NAME = c(offset, length), ...), references = list(),
  compressed = TRUE | 2L | 3L)``.
- Each object is a record of ``length`` bytes at ``offset`` in the ``.rdb`` file: a 4-byte
  big-endian uncompressed size, then a zlib stream when ``compressed`` is TRUE/1, or, when it
  is 2 or 3, one method byte and the data: ``Z`` xz, ``2`` bzip2, ``1`` zlib, ``0`` stored.
- The decompressed bytes are an R serialization (XDR ``X\\n``, version 2 or 3). The PyPI
  package ``rdata`` parses them; it is imported on first use.
"""

from __future__ import annotations

import bz2
import lzma
import os
import struct
import zlib

from .errors import CorpusError

_SELF_DESCRIBING = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"X\n", b"A\n", b"B\n")


def _rdata():
    try:
        import rdata
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("reading R data needs the 'rdata' package: pip install rdata") from exc
    return rdata


def decompress_record(record: bytes, compressed: int = 1) -> bytes:
    """Decompress one lazy-load record (see the module docstring for the layout).

    Args:
        record: the record's bytes, starting with the 4-byte big-endian uncompressed size.
        compressed: the index's ``compressed`` value: 1 (or True) zlib, 2 or 3 method byte.
    Returns:
        the R serialization bytes.
    Raises:
        CorpusError: a truncated record, an unknown method, corrupt data, or a size mismatch.
    """
    if len(record) < 4:
        raise CorpusError(f"record of {len(record)} bytes is shorter than its 4-byte header")
    (size,) = struct.unpack(">I", record[:4])
    body, decode = record[4:], zlib.decompress
    if int(compressed) in (2, 3):
        method, body = body[:1], body[1:]
        decoders = {b"Z": lzma.decompress, b"2": bz2.decompress, b"1": zlib.decompress,
                    b"0": bytes}
        if method not in decoders:
            raise CorpusError(f"unknown record compression method {method!r}")
        decode = decoders[method]
    try:
        data = decode(body)
    except (zlib.error, lzma.LZMAError, OSError, EOFError) as exc:
        raise CorpusError(f"corrupt compressed record: {exc}") from exc
    if len(data) != size:
        raise CorpusError(f"record says {size} bytes but decompresses to {len(data)}")
    return data


def parse_serialized(data: bytes):
    """Parse R serialization bytes (or a gzip/bzip2/xz stream of them) with ``rdata``.

    Returns:
        the ``rdata.parser.RData`` tree; its ``.object`` is the top-level ``RObject``.
    Raises:
        CorpusError: the bytes are not an R serialization ``rdata`` can read.
        ImportError: ``rdata`` is not installed.
    """
    rdata = _rdata()
    try:
        return rdata.parser.parse_data(bytes(data), extension=".rds")
    except Exception as exc:  # rdata raises ValueError, NotImplementedError, struct.error...
        raise CorpusError(f"not a readable R serialization: {type(exc).__name__}: {exc}") from exc


def strings_of(parsed) -> list[str | None]:
    """The elements of a parsed R character vector, NA as None.

    Raises:
        CorpusError: the object is not a character vector.
    """
    rdata = _rdata()
    obj = parsed.object
    if obj.info.type is not rdata.parser.RObjectType.STR:
        raise CorpusError(f"expected an R character vector, found {obj.info.type.name}")
    return [rdata.conversion.convert_char(c) for c in obj.value]


class LazyLoadDB:
    """An R lazy-load database opened for reading.

    Args:
        path: the ``.rdx`` file, the ``.rdb`` file, or their common stem.
    Attributes:
        index: object name -> (offset, length) of its record in the ``.rdb``.
        compressed: the index's compression code (1 zlib; 2 or 3 with a method byte).
    Raises:
        CorpusError: either file is missing or the index is malformed (names the file).
    """

    def __init__(self, path: str | os.PathLike):
        stem = os.fspath(path)
        if stem.endswith((".rdx", ".rdb")):
            stem = stem[:-4]
        self.rdx_path, self.rdb_path = stem + ".rdx", stem + ".rdb"
        for p in (self.rdx_path, self.rdb_path):
            if not os.path.isfile(p):
                raise CorpusError(f"{p}: no such file (a lazy-load database needs .rdx and .rdb)")
        self.index, self.compressed = self._read_index()

    def _read_index(self) -> tuple[dict[str, tuple[int, int]], int]:
        with open(self.rdx_path, "rb") as f:
            raw = f.read()
        try:
            if not raw.startswith(_SELF_DESCRIBING):
                raw = decompress_record(raw, 1)
            tree = _rdata().conversion.convert(parse_serialized(raw))
            variables = tree["variables"]
            index = {str(k): (int(v[0]), int(v[1])) for k, v in variables.items()}
            compressed = int(tree.get("compressed", [1])[0])
        except CorpusError as exc:
            raise CorpusError(f"{self.rdx_path}: {exc}") from exc
        except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
            raise CorpusError(f"{self.rdx_path}: not an R lazy-load index ({exc!r})") from exc
        return index, compressed

    @property
    def names(self) -> tuple[str, ...]:
        """The object names in the index, sorted."""
        return tuple(sorted(self.index))

    def raw(self, name: str) -> bytes:
        """The decompressed R serialization of object ``name``.

        Raises:
            CorpusError: no such object, or its record is truncated or corrupt (names the file).
        """
        if name not in self.index:
            raise CorpusError(f"{self.rdx_path}: no object {name!r}; it holds {list(self.names)}")
        offset, length = self.index[name]
        with open(self.rdb_path, "rb") as f:
            f.seek(offset)
            record = f.read(length)
        if len(record) != length:
            raise CorpusError(f"{self.rdb_path}: record {name!r} at {offset} is truncated")
        try:
            return decompress_record(record, self.compressed)
        except CorpusError as exc:
            raise CorpusError(f"{self.rdb_path}: object {name!r}: {exc}") from exc

    def strings(self, name: str) -> list[str | None]:
        """Object ``name`` as a list of Python strings (one per element; NA is None).

        Raises:
            CorpusError: no such object, a corrupt record, or not a character vector.
        """
        data = self.raw(name)
        try:
            return strings_of(parse_serialized(data))
        except CorpusError as exc:
            raise CorpusError(f"{self.rdb_path}: object {name!r}: {exc}") from exc
