"""R lazy-load reader and the Austen loader, on R serialization bytes built here by hand
(XDR, as R's serialize() writes them; R itself is not needed)."""

import bz2
import gzip
import lzma
import os
import shutil
import struct
import subprocess
import zlib

import pytest

from rnngraph.data import (NOVELS, CorpusError, FetchError, LazyLoadDB, default_cache_dir,
                           load_austen)
from rnngraph.data.rdata_db import decompress_record, parse_serialized, strings_of

# ---- a minimal R serializer (XDR big-endian) -------------------------------------------
ASCII, UTF8, LATIN1 = 64, 8, 4  # CHARSXP encoding bits (in the "levels" field)
NILVALUE = struct.pack(">i", 254)


def i32(*vals):
    return struct.pack(f">{len(vals)}i", *vals)


def flags(sexptype, *, attr=False, tag=False, levels=0):
    return i32(sexptype | attr << 9 | tag << 10 | levels << 12)


def header(version=3):
    out = b"X\n" + i32(version, 0x040201, 0x030500 if version == 3 else 0x020300)
    return out + (i32(5) + b"UTF-8" if version == 3 else b"")


def charsxp(s, encoding="utf-8"):
    if s is None:
        return flags(9) + i32(-1)  # NA_STRING
    data = s.encode(encoding)
    levels = ASCII if s.isascii() else (LATIN1 if encoding == "latin-1" else UTF8)
    return flags(9, levels=levels) + i32(len(data)) + data


def strsxp(items, encoding="utf-8"):
    return flags(16) + i32(len(items)) + b"".join(charsxp(x, encoding) for x in items)


def intsxp(vals):
    return flags(13) + i32(len(vals), *vals)


def names_attr(names, symbol):
    """Attribute pairlist ``names = <names>`` (``symbol``: a SYMSXP or a reference to one)."""
    return flags(2, tag=True) + symbol + strsxp(names) + NILVALUE


NAMES_SYM = i32(1) + charsxp("names")  # first use: enters the reference table as #1
NAMES_REF = i32(1 << 8 | 255)  # REFSXP to reference #1


def index_bytes(entries, compressed=1):
    """``list(variables = list(name = c(off, len), ...), references = list(), compressed = ...)``
    laid out as R writes a lazy-load index."""
    variables = (flags(19, attr=True) + i32(len(entries))
                 + b"".join(intsxp(list(v)) for v in entries.values())
                 + names_attr(list(entries), NAMES_SYM))
    comp = flags(10) + i32(1, 1) if compressed == 1 else intsxp([compressed])
    outer = (flags(19, attr=True) + i32(3) + variables + flags(19) + i32(0) + comp
             + names_attr(["variables", "references", "compressed"], NAMES_REF))
    return header() + outer


def record(raw, method=None):
    body = zlib.compress(raw) if method is None else method + {
        b"Z": lzma.compress, b"2": bz2.compress, b"1": zlib.compress, b"0": bytes}[method](raw)
    return struct.pack(">I", len(raw)) + body


def write_db(stem, objects, rdx_as_record=False, method=None):
    """Write ``stem.rdx``/``stem.rdb`` holding ``objects`` (name -> serialization body),
    records compressed with zlib (``method`` None) or ``method`` (``compressed = 3``)."""
    rdb, entries = b"", {}
    for name, body in objects.items():
        rec = record(header() + body, method)
        entries[name] = (len(rdb), len(rec))
        rdb += rec
    index = index_bytes(entries, 1 if method is None else 3)
    with open(f"{stem}.rdx", "wb") as f:
        f.write(record(index) if rdx_as_record else gzip.compress(index))
    with open(f"{stem}.rdb", "wb") as f:
        f.write(rdb)


# ---- the parser on constructed bytes ---------------------------------------------------
@pytest.mark.parametrize("version", [2, 3])
def test_character_vector_with_na_and_encodings(version):
    data = header(version) + strsxp(["EMMA", "", None, "Émile’s £5"])
    assert strings_of(parse_serialized(data)) == ["EMMA", "", None, "Émile’s £5"]


def test_latin1_strings_are_decoded():
    data = header() + strsxp(["café", "plain"], encoding="latin-1")
    assert strings_of(parse_serialized(data)) == ["café", "plain"]


def test_non_character_object_is_rejected():
    with pytest.raises(CorpusError, match="character vector"):
        strings_of(parse_serialized(header() + intsxp([1, 2])))


def test_garbage_is_a_corpus_error():
    with pytest.raises(CorpusError, match="R serialization"):
        parse_serialized(b"X\n\x00\x00")


@pytest.mark.parametrize("method", [None, b"Z", b"2", b"1", b"0"])
def test_decompress_record_methods(method):
    raw = header() + strsxp(["a"] * 50)
    assert decompress_record(record(raw, method), 1 if method is None else 3) == raw


def test_decompress_record_errors():
    raw = b"X\nsome bytes"
    with pytest.raises(CorpusError, match="says 99 bytes"):
        decompress_record(struct.pack(">I", 99) + zlib.compress(raw))
    with pytest.raises(CorpusError, match="unknown record compression"):
        decompress_record(struct.pack(">I", len(raw)) + b"Q" + raw, 3)
    with pytest.raises(CorpusError, match="corrupt"):
        decompress_record(struct.pack(">I", 5) + b"not zlib")
    with pytest.raises(CorpusError, match="shorter than"):
        decompress_record(b"\x00\x01")


# ---- the lazy-load database ------------------------------------------------------------
@pytest.mark.parametrize("rdx_as_record,method", [(False, None), (True, None), (False, b"Z")])
def test_lazyload_db_roundtrip(tmp_path, rdx_as_record, method):
    stem = tmp_path / "Rdata"
    objects = {"b": strsxp(["x", None]), "a": strsxp(["line 1", "line 2"])}
    write_db(stem, objects, rdx_as_record, method)
    db = LazyLoadDB(f"{stem}.rdx")
    assert db.names == ("a", "b") and db.compressed == (1 if method is None else 3)
    assert db.strings("a") == ["line 1", "line 2"] and db.strings("b") == ["x", None]
    assert LazyLoadDB(stem).index == db.index


def test_lazyload_db_errors_name_the_file(tmp_path):
    stem = tmp_path / "Rdata"
    with pytest.raises(CorpusError, match=r"Rdata\.rdx: no such file"):
        LazyLoadDB(stem)
    write_db(stem, {"nums": intsxp([1, 2, 3]), "txt": strsxp(["a"])})
    db = LazyLoadDB(stem)
    with pytest.raises(CorpusError, match=r"Rdata\.rdx: no object 'emma'"):
        db.strings("emma")
    with pytest.raises(CorpusError, match=r"Rdata\.rdb: object 'nums': .*character vector"):
        db.strings("nums")
    (tmp_path / "Rdata.rdb").write_bytes(b"\x00" * 8)
    with pytest.raises(CorpusError, match=r"Rdata\.rdb: "):
        db.strings("txt")
    (tmp_path / "Rdata.rdx").write_bytes(gzip.compress(header() + strsxp(["x"])))
    with pytest.raises(CorpusError, match=r"Rdata\.rdx: not an R lazy-load index"):
        LazyLoadDB(stem)


# ---- the Austen loader on a fake package -----------------------------------------------
FAKE = {n: [n.upper(), "", "By Jane Austen", None, f"{n} ends – “here”"] for n in NOVELS}


def fake_package(root):
    data = root / "usr/lib/R/site-library/janeaustenr/data"
    data.mkdir(parents=True)
    write_db(data / "Rdata", {n: strsxp(lines) for n, lines in FAKE.items()})


def expected_text(name):
    return "\n".join("" if x is None else x for x in FAKE[name])


def fake_apt_get(monkeypatch, tmp_path, script, keep_path=True):
    """Put an ``apt-get`` running ``script`` first on PATH (alone if not ``keep_path``)."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "apt-get").write_text("#!/bin/sh\n" + script)
    (bin_dir / "apt-get").chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}" if keep_path else str(bin_dir)
    monkeypatch.setenv("PATH", path)


def no_apt(monkeypatch, tmp_path):
    """An apt-get that fails loudly, so that no test downloads by accident."""
    fake_apt_get(monkeypatch, tmp_path, "echo 'E: this test must not download' >&2; exit 1\n")


def test_load_austen_from_unpacked_package_then_cache(tmp_path, monkeypatch):
    no_apt(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    fake_package(cache / "deb")
    texts = load_austen(cache)
    assert sorted(texts) == sorted(NOVELS)
    assert all(texts[n] == expected_text(n) for n in NOVELS)
    shutil.rmtree(cache / "deb")  # the second load must come from the .txt cache alone
    assert load_austen(cache) == texts
    assert (cache / "emma.txt").read_text(encoding="utf-8") == expected_text("emma")


def test_load_austen_unpacks_a_deb_in_the_cache(tmp_path, monkeypatch):
    dpkg_deb = shutil.which("dpkg-deb")
    if dpkg_deb is None:
        pytest.skip("dpkg-deb not installed")
    tree = tmp_path / "tree"
    fake_package(tree)
    (tree / "DEBIAN").mkdir()
    (tree / "DEBIAN/control").write_text(
        "Package: r-cran-janeaustenr\nVersion: 0.0-1\nArchitecture: all\n"
        "Maintainer: test <t@example.org>\nDescription: test package\n")
    cache = tmp_path / "cache"
    cache.mkdir()
    subprocess.run([dpkg_deb, "--root-owner-group", "-b", str(tree),
                    str(cache / "r-cran-janeaustenr_0.0-1_all.deb")],
                   check=True, capture_output=True)
    no_apt(monkeypatch, tmp_path)
    assert load_austen(cache)["persuasion"] == expected_text("persuasion")


def test_load_austen_missing_novel(tmp_path, monkeypatch):
    no_apt(monkeypatch, tmp_path)
    data = tmp_path / "janeaustenr/data"
    data.mkdir(parents=True)
    write_db(data / "Rdata", {"emma": strsxp(["x"])})
    with pytest.raises(CorpusError, match=r"Rdata\.rdx: lacks novels"):
        load_austen(tmp_path)


def test_stale_package_lists_say_run_apt_get_update(tmp_path, monkeypatch):
    fake_apt_get(monkeypatch, tmp_path,
                 "echo 'E: Unable to locate package r-cran-janeaustenr' >&2; exit 100\n")
    with pytest.raises(FetchError, match=r"run `apt-get update`.*Unable to locate"):
        load_austen(tmp_path / "cache")


def test_no_apt_get_says_how_to_supply_the_package(tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(FetchError, match=r"apt-get not found.*r-cran-janeaustenr_\*\.deb"):
        load_austen(tmp_path / "cache")


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("RNNGRAPH_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "austen"
    monkeypatch.delenv("RNNGRAPH_CACHE")
    assert default_cache_dir().parts[-3:] == (".cache", "rnngraph", "austen")


def test_real_package_downloads_and_parses(tmp_path):
    """Fetches the real Debian package (1.6 MB); skips without apt-get or a usable mirror."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        pytest.skip("apt-get / dpkg-deb not installed")
    try:
        texts = load_austen(tmp_path)
    except FetchError as exc:
        pytest.skip(f"cannot fetch the package here: {exc}")
    assert sorted(texts) == sorted(NOVELS)
    assert texts["emma"].startswith("EMMA\n")
    assert texts["persuasion"].startswith("Persuasion\n")
    assert all(400_000 < len(t) < 900_000 for t in texts.values())
    assert "It is a truth universally acknowledged" in texts["prideprejudice"]
