"""Finding the .ts files that aeon's wheel ships: an installed aeon (never imported), the cache,
a wheel in the cache, a download; all without the network (pip is replaced where it would run)."""

import subprocess
import sys
import zipfile

import pytest

from rnngraph.data import FetchError, aeon_ts_paths, load_aeon_dataset
from rnngraph.data import uea_aeon

TRAIN = "@problemName Toy\n@classLabel true p q\n@data\n1,2:p\n3:q\n"
TEST = "@problemName Toy\n@classLabel true p q\n@data\n5,6,7:q\n"


def make_wheel(folder, name="Toy", files=None):
    files = files if files is not None else {f"{name}_TRAIN.ts": TRAIN, f"{name}_TEST.ts": TEST}
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "aeon-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("aeon/__init__.py", "")
        for file, text in files.items():
            z.writestr(f"aeon/datasets/data/{name}/{file}", text)
    return wheel


def test_wheel_in_cache_is_extracted_then_cache_alone_serves(tmp_path):
    wheel = make_wheel(tmp_path)
    train, test = load_aeon_dataset("Toy", cache_dir=tmp_path, download=False)
    assert train.lengths.tolist() == [2, 1] and train.labels == ("p", "q")
    assert test.series[0][:, 0].tolist() == [5, 6, 7] and test.y.tolist() == [1]
    assert (tmp_path / "Toy" / "Toy_TRAIN.ts").read_text() == TRAIN
    wheel.unlink()
    paths = aeon_ts_paths("Toy", cache_dir=tmp_path, download=False)
    assert paths == (tmp_path / "Toy" / "Toy_TRAIN.ts", tmp_path / "Toy" / "Toy_TEST.ts")


def test_installed_aeon_is_found_without_importing_it(tmp_path, monkeypatch):
    site = tmp_path / "site"
    data = site / "aeon" / "datasets" / "data" / "Toy"
    data.mkdir(parents=True)
    (site / "aeon" / "__init__.py").write_text("raise RuntimeError('aeon was imported')\n")
    (data / "Toy_TRAIN.ts").write_text(TRAIN)
    (data / "Toy_TEST.ts").write_text(TEST)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "aeon", raising=False)
    paths = aeon_ts_paths("Toy", cache_dir=tmp_path / "cache", download=False)
    assert paths == (data / "Toy_TRAIN.ts", data / "Toy_TEST.ts")
    assert "aeon" not in sys.modules and not (tmp_path / "cache").exists()


def test_nothing_found_and_no_download_says_what_to_install(tmp_path):
    with pytest.raises(FetchError) as err:
        aeon_ts_paths("Toy", cache_dir=tmp_path, download=False)
    msg = str(err.value)
    assert "Toy_TRAIN.ts / Toy_TEST.ts not found (and download=False)" in msg
    assert f"pip install --no-deps aeon=={uea_aeon.AEON_VERSION}" in msg
    assert str(tmp_path / "Toy") in msg


def test_download_runs_pip_without_deps_and_extracts(tmp_path, monkeypatch, capsys):
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        make_wheel(tmp_path / "cache")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(uea_aeon.subprocess, "run", fake_run)
    train, _ = load_aeon_dataset("Toy", cache_dir=tmp_path / "cache")
    assert len(train) == 2 and len(calls) == 1
    assert calls[0][:3] == [sys.executable, "-m", "pip"] and "--no-deps" in calls[0]
    assert f"aeon=={uea_aeon.AEON_VERSION}" in calls[0]
    assert capsys.readouterr().err == (f"fetching Toy: pip download aeon=={uea_aeon.AEON_VERSION} (6.4 MB) into "
                                       f"{tmp_path / 'cache'}\n")  # said once, when it downloads
    load_aeon_dataset("Toy", cache_dir=tmp_path / "cache")
    assert len(calls) == 1 and capsys.readouterr().err == ""


def test_failed_download_reports_pip_error(tmp_path, monkeypatch):
    monkeypatch.setattr(uea_aeon.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 1, "", "ERROR: No matching distribution found for aeon"))
    with pytest.raises(FetchError, match=r"failed with exit 1: ERROR: No matching distribution"):
        aeon_ts_paths("Toy", cache_dir=tmp_path)


def test_wheel_without_the_data_set(tmp_path):
    make_wheel(tmp_path, name="Other")
    with pytest.raises(FetchError, match=r"aeon-9\.9\.9-py3-none-any\.whl: has no "
                                         r"aeon/datasets/data/Toy/Toy_TRAIN\.ts"):
        aeon_ts_paths("Toy", cache_dir=tmp_path, download=False)


def test_japanese_vowels_from_a_wheel_is_checked_against_its_sha256(tmp_path, monkeypatch):
    monkeypatch.setattr(uea_aeon, "_installed_aeon_folder", lambda name: None)
    make_wheel(tmp_path, name="JapaneseVowels",
               files={"JapaneseVowels_TRAIN.ts": TRAIN, "JapaneseVowels_TEST.ts": TEST})
    with pytest.raises(FetchError, match=r"JapaneseVowels_TRAIN\.ts has SHA-256 [0-9a-f]{64}, "
                                         r"expected 68a430ea"):
        uea_aeon.japanese_vowels(cache_dir=tmp_path, download=False)


def test_corrupt_wheel(tmp_path):
    (tmp_path / "aeon-1.6.0-py3-none-any.whl").write_bytes(b"not a zip")
    with pytest.raises(FetchError, match=r"not a readable wheel .*; delete it"):
        aeon_ts_paths("Toy", cache_dir=tmp_path, download=False)


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("RNNGRAPH_CACHE", str(tmp_path))
    assert uea_aeon.default_uea_cache_dir() == tmp_path / "uea"
    monkeypatch.delenv("RNNGRAPH_CACHE")
    assert uea_aeon.default_uea_cache_dir().parts[-3:] == (".cache", "rnngraph", "uea")
