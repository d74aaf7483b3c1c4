"""UEA/UCR data sets that the ``aeon`` wheel ships as ``.ts`` files (JapaneseVowels among them).

The wheel holds ``aeon/datasets/data/NAME/NAME_TRAIN.ts`` and ``NAME_TEST.ts``. This module
finds them without importing aeon, trying in turn:

1. an installed aeon (located with ``importlib.util.find_spec``; its code never runs);
2. ``CACHE/NAME/NAME_{TRAIN,TEST}.ts`` (copy the two files there by hand to work offline);
3. an ``aeon-*.whl`` in ``CACHE``, from which the two files are extracted into ``CACHE/NAME``;
4. ``python -m pip download aeon==AEON_VERSION --no-deps`` into ``CACHE`` (6.4 MB), then 3.

``CACHE`` is the ``cache_dir`` argument, else ``$RNNGRAPH_CACHE/uea``, else
``~/.cache/rnngraph/uea``. Installing aeon with its dependencies is not needed, and not
advised in rnngraph's environment: aeon 1.6.0 pins ``numba<0.64`` and pulls in pandas,
scikit-learn and scipy; ``pip install --no-deps aeon==1.6.0`` (34 MB) is enough for step 1.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from .cache import cache_root
from .errors import FetchError
from .uea_ts import TsDataset, read_ts

#: The aeon release whose wheel step 4 downloads.
AEON_VERSION = "1.6.0"
#: SHA-256 of files as aeon 1.6.0 ships them; files extracted from a wheel are checked.
SHA256 = {
    "JapaneseVowels_TRAIN.ts": "68a430eabd919cc77f40b1f5f3bc0dcafacc1486bca9260785aeb7d262cc78cd",
    "JapaneseVowels_TEST.ts": "b3d41d6a0ca3bcad3afb9ca7d4365382aa51341e2e58bae2a574babdda5b9462",
}
SPLITS = ("TRAIN", "TEST")


def default_uea_cache_dir() -> Path:
    """``$RNNGRAPH_CACHE/uea`` if ``RNNGRAPH_CACHE`` is set, else ``~/.cache/rnngraph/uea``."""
    return cache_root() / "uea"


def japanese_vowels(cache_dir: str | os.PathLike | None = None,
                    download: bool = True) -> tuple[TsDataset, TsDataset]:
    """JapaneseVowels (Kudo et al. 1999): 9 speakers, 12 LPC cepstrum coefficients a step.

    Returns:
        (train, test) :class:`~rnngraph.data.uea_ts.TsDataset`: 270 and 370 series of
        7 to 29 steps, dims 12, class_names ``("1", ..., "9")`` (the speaker), ``y`` int64 0..8.
    Raises:
        FetchError: the files are nowhere (see the module docstring) and ``download`` is
            False or the download fails; the message says what to install or where to put
            which file.
        CorpusError: a file found is malformed.
    """
    return load_aeon_dataset("JapaneseVowels", cache_dir=cache_dir, download=download)


def load_aeon_dataset(name: str, cache_dir: str | os.PathLike | None = None,
                      download: bool = True) -> tuple[TsDataset, TsDataset]:
    """The train and test split of a data set in aeon's wheel, e.g. ``"BasicMotions"``.

    Returns:
        (train, test) :class:`~rnngraph.data.uea_ts.TsDataset`.
    Raises:
        FetchError, CorpusError: as :func:`aeon_ts_paths` and
            :func:`~rnngraph.data.uea_ts.read_ts` raise them.
    """
    train, test = aeon_ts_paths(name, cache_dir=cache_dir, download=download)
    return read_ts(train), read_ts(test)


def aeon_ts_paths(name: str, cache_dir: str | os.PathLike | None = None,
                  download: bool = True) -> tuple[Path, Path]:
    """The paths of ``NAME_TRAIN.ts`` and ``NAME_TEST.ts``, found, extracted or downloaded in
    the order the module docstring gives.

    Raises:
        FetchError: not found, and ``download`` is False, pip fails, or the wheel lacks the
            files or holds files whose SHA-256 differs from :data:`SHA256`.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_uea_cache_dir()
    for folder in (_installed_aeon_folder(name), cache / name):
        paths = _pair(folder, name) if folder is not None else None
        if paths is not None:
            return paths
    wheels = sorted(cache.glob("aeon-*.whl"))
    if not wheels:
        if not download:
            raise FetchError(_missing(name, cache, "and download=False"))
        wheels = [_download_wheel(cache, name)]
    return _extract(wheels[-1], cache, name)


def _pair(folder: Path, name: str) -> tuple[Path, Path] | None:
    paths = tuple(folder / f"{name}_{split}.ts" for split in SPLITS)
    return paths if all(p.is_file() for p in paths) else None


def _installed_aeon_folder(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec("aeon")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data" / name


def _missing(name: str, cache: Path, why: str) -> str:
    return (f"{name}_TRAIN.ts / {name}_TEST.ts not found ({why}). They ship in the aeon wheel: "
            f"`pip install --no-deps aeon=={AEON_VERSION}` (no need for aeon's dependencies), "
            f"or `pip download --no-deps aeon=={AEON_VERSION} -d {cache}`, or copy the two "
            f"files into {cache / name}")


def _download_wheel(cache: Path, name: str) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    print(f"fetching {name}: pip download aeon=={AEON_VERSION} (6.4 MB) into {cache}", file=sys.stderr,
          flush=True)  # once per cache, as the Austen corpus's download is said
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", f"aeon=={AEON_VERSION}", "-d", str(cache)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(cache.glob("aeon-*.whl"))
    if proc.returncode != 0 or not wheels:
        err = (proc.stderr or proc.stdout).strip()[-500:]
        raise FetchError(_missing(name, cache, f"`{' '.join(cmd[1:])}` failed with exit "
                                               f"{proc.returncode}: {err}"))
    return wheels[-1]


def _extract(wheel: Path, cache: Path, name: str) -> tuple[Path, Path]:
    folder = cache / name
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(wheel) as z:
            for split in SPLITS:
                file = f"{name}_{split}.ts"
                member = f"aeon/datasets/data/{name}/{file}"
                if member not in z.namelist():
                    raise FetchError(f"{wheel}: has no {member}; aeon's wheel ships only some "
                                     "data sets (see aeon/datasets/data/ in it)")
                data = z.read(member)
                digest = hashlib.sha256(data).hexdigest()
                if file in SHA256 and digest != SHA256[file]:
                    raise FetchError(f"{wheel}: {member} has SHA-256 {digest}, expected "
                                     f"{SHA256[file]} (aeon {AEON_VERSION}); delete the wheel")
                tmp = folder / f".{file}.{os.getpid()}"
                tmp.write_bytes(data)
                os.replace(tmp, folder / file)
    except (zipfile.BadZipFile, OSError) as exc:
        raise FetchError(f"{wheel}: not a readable wheel ({exc}); delete it") from exc
    return _pair(folder, name)
