"""One namespace: the wheel installs ``sublayer_search`` and nothing else at the top level."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("spaces", "models", "search", "analysis")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # build from a copy: setuptools leaves build/ behind, and a stale build/lib would
    # both pollute the checkout and hide files deleted since
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for pkg in PACKAGES:
        shutil.copytree(REPO / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "-v", "-w", str(out), str(src)], check=True,
                           capture_output=True, text=True,
                           env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    (out / "build.log").write_text(built.stdout + built.stderr)
    (path,) = out.glob("sublayer_search-*.whl")
    return path


def test_wheel_has_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    dist_info = {t for t in top if t.endswith(".dist-info")}
    assert len(dist_info) == 1
    assert top - dist_info == {"sublayer_search"}, sorted(top)


def test_wheel_holds_every_source_file(wheel: Path) -> None:
    """Every module of the four folders (and the built-in data) is in the wheel."""
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"sublayer_search/{p.relative_to(REPO).as_posix()}"
                for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    expected |= {f"sublayer_search/analysis/data/{name}"  # the built-in paper tables
                 for name in ("press2020_tables.csv", "crossformer_tables.csv")}
    assert expected - names == set()


def test_build_has_no_ignored_package_warning(wheel: Path) -> None:
    """The data folder is a declared package: setuptools prints no "would be ignored" banner."""
    log = (wheel.parent / "build.log").read_text()
    assert "Building wheel" in log or "wheel" in log  # the verbose build output was kept
    assert "would be ignored" not in log, log[-3000:]
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "sublayer_search/analysis/data/mini_press2020_meta.json" in names


def test_installed_wheel_entry_point_runs(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    script = target / "bin" / "sublayer"
    assert script.is_file()
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run(
        [sys.executable, "-c", "import sublayer_search.search.cli.main as c; print(c.__file__)"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(target)), where
    for name in PACKAGES:  # no generic top-level names from this project
        assert not (target / name).exists()
    done = subprocess.run([sys.executable, str(script), "spaces", "sample", "sandwich", "n=4",
                           "k=[1]"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "ssfsfsff" in done.stdout  # s^1 (sf)^3 f^1


def test_editable_install_resolves_the_namespace() -> None:
    """``make install`` (editable) maps the namespace onto the top-level folders."""
    import sublayer_search.analysis
    import sublayer_search.spaces

    assert Path(sublayer_search.spaces.__file__).parent == REPO / "spaces"
    assert Path(sublayer_search.analysis.__file__).parent == REPO / "analysis"
