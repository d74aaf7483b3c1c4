"""Jane Austen's six novels, from the Debian package ``r-cran-janeaustenr``.

The package (public-domain texts, MIT-licensed package) holds the novels as R character
vectors, one element per line, in the lazy-load database ``janeaustenr/data/Rdata.{rdx,rdb}``.
:func:`load_austen` fetches it once with ``apt-get download`` and ``dpkg-deb -x``, parses it
with :class:`~rnngraph.data.rdata_db.LazyLoadDB`, and caches each novel as ``NAME.txt``
(UTF-8) so later loads only read six text files.

Cache directory: the ``cache_dir`` argument if given, else ``$RNNGRAPH_CACHE/austen`` if the
environment variable ``RNNGRAPH_CACHE`` is set, else ``~/.cache/rnngraph/austen``. To work
offline, put ``r-cran-janeaustenr_*.deb`` (or the six ``NAME.txt`` files) in that directory.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

from .cache import cache_root
from .errors import CorpusError, FetchError
from .rdata_db import LazyLoadDB

PACKAGE = "r-cran-janeaustenr"
#: The six object names in the package's database (sorted), one per novel.
NOVELS = ("emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice",
          "sensesensibility")
#: Titles and first-publication years, for display.
TITLES = {
    "sensesensibility": ("Sense and Sensibility", 1811),
    "prideprejudice": ("Pride and Prejudice", 1813),
    "mansfieldpark": ("Mansfield Park", 1814),
    "emma": ("Emma", 1815),
    "northangerabbey": ("Northanger Abbey", 1817),
    "persuasion": ("Persuasion", 1817),
}


def default_cache_dir() -> Path:
    """``$RNNGRAPH_CACHE/austen`` if ``RNNGRAPH_CACHE`` is set, else
    ``~/.cache/rnngraph/austen``."""
    return cache_root() / "austen"


def load_austen(cache_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """The six novels: name (see :data:`NOVELS`) -> full text, its lines joined with ``"\\n"``
    (no trailing newline; an NA line, of which there are none, would be empty).

    Reads the cached ``NAME.txt`` files when all six are present; otherwise parses the
    package's database (fetching and unpacking the package first if needed) and writes them.

    Raises:
        FetchError: the package is not cached and cannot be fetched or unpacked (the message
            says whether ``apt-get update`` is needed, or how to supply the ``.deb`` by hand).
        CorpusError: the cache or the package's database is unreadable or lacks a novel.
    """
    # absolute: apt-get and dpkg-deb run inside the cache directory (a relative path given here
    # would name a place below it)
    cache = (Path(cache_dir) if cache_dir is not None else default_cache_dir()).absolute()
    texts = _read_cached(cache)
    if texts is not None:
        return texts
    cache.mkdir(parents=True, exist_ok=True)
    db = LazyLoadDB(_find_database(cache) or _fetch(cache))
    missing = [n for n in NOVELS if n not in db.index]
    if missing:
        raise CorpusError(f"{db.rdx_path}: lacks novels {missing}; it holds {list(db.names)}")
    texts = {n: "\n".join("" if line is None else line for line in db.strings(n)) for n in NOVELS}
    for name, text in texts.items():
        tmp = cache / f".{name}.txt.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, cache / f"{name}.txt")
    return texts


def _read_cached(cache: Path) -> dict[str, str] | None:
    paths = {n: cache / f"{n}.txt" for n in NOVELS}
    if not all(p.is_file() for p in paths.values()):
        return None
    texts = {}
    for name, path in paths.items():
        try:
            with open(path, encoding="utf-8", newline="") as f:
                texts[name] = f.read()
        except UnicodeDecodeError as exc:
            raise CorpusError(f"{path}: cached novel is not UTF-8 at byte offset {exc.start}; "
                              "delete it to rebuild the cache") from exc
    return texts


def _find_database(cache: Path) -> str | None:
    hits = sorted(glob.glob(str(cache / "**" / "janeaustenr" / "data" / "Rdata.rdx"),
                            recursive=True))
    return hits[0] if hits else None


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise FetchError(
            f"{cmd[0]} not found: the Austen corpus comes from the Debian package {PACKAGE}; "
            f"without {cmd[0]}, put {PACKAGE}_*.deb (from any Debian mirror) or the six files "
            f"{', '.join(f'{n}.txt' for n in NOVELS)} in {cwd}, or train on a text file of your own "
            f"(rnngraph train --corpus FILE)") from exc


def _fetch(cache: Path) -> str:
    """Download (unless a .deb is already there) and unpack the package into ``cache``;
    return the path of its ``Rdata.rdx``."""
    debs = sorted(cache.glob(f"{PACKAGE}_*.deb"))
    if not debs:  # once per cache: said on stderr, as a dataset's download is
        print(f"fetching the Austen corpus: apt-get download {PACKAGE} into {cache}", file=sys.stderr, flush=True)
        proc = _run(["apt-get", "download", PACKAGE], cache)
        debs = sorted(cache.glob(f"{PACKAGE}_*.deb"))
        if proc.returncode != 0 or not debs:
            err = (proc.stderr or proc.stdout).strip()
            stale = any(s in err for s in ("Unable to locate package", "no installation candidate",
                                            "Can't select", "has no installation candidate"))
            hint = ("the package lists are missing or stale: run `apt-get update` (as root) "
                    "and try again" if stale else "check the network and the apt sources; "
                    "running `apt-get update` first may help")
            raise FetchError(f"`apt-get download {PACKAGE}` in {cache} failed "
                             f"(exit {proc.returncode}): {hint}. apt-get said: {err[-500:]}")
    unpacked = cache / "deb"
    proc = _run(["dpkg-deb", "-x", str(debs[-1]), str(unpacked)], cache)
    if proc.returncode != 0:
        raise FetchError(f"`dpkg-deb -x {debs[-1]}` failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip()[-500:]}; delete the file to download it again")
    found = _find_database(cache)
    if found is None:
        raise FetchError(f"{debs[-1]}: no janeaustenr/data/Rdata.rdx inside the package")
    return found
