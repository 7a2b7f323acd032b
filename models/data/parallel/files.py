"""Reading parallel text and finding (or downloading) its files (see :mod:`.parallel`)."""

from __future__ import annotations

import os
from pathlib import Path

from sublayer_search.models.data.download import ENV_DATA_DIR, cache_root, data_root, rebase_url
from sublayer_search.models.data.errors import DataError, setting_error
from sublayer_search.models.data.parallel.config import (
    SPLITS,
    ParallelDataConfig,
    ParallelSpec,
    parallel_info,
)
from sublayer_search.models.data.verified import gunzip, place, retrieve, staging

__all__ = ["fetch_parallel", "read_lines", "read_pairs", "resolve_parallel_files"]


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 file, split on ``\\n`` only (a final newline ends the last line)."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 text ({exc.reason})") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def _unbpe(line: str) -> str:
    line = (line + " ").replace("@@ ", "")
    return line.rstrip()


def read_pairs(src: Path, tgt: Path, *, strip_bpe: bool = False) -> tuple[list[str], list[str]]:
    """Aligned lines of two files (both-blank pairs dropped, whitespace normalised).

    Raises DataError naming both files and their line counts when they differ.
    """
    a, b = read_lines(src), read_lines(tgt)
    if len(a) != len(b):
        raise DataError(
            f"parallel files differ in length: {src} has {len(a)} lines but {tgt} has "
            f"{len(b)} lines (expected one line per sentence on both sides)"
        )
    out_a, out_b = [], []
    for x, y in zip(a, b, strict=True):
        if strip_bpe:
            x, y = _unbpe(x), _unbpe(y)
        x, y = " ".join(x.split()), " ".join(y.split())
        if x or y:
            out_a.append(x)
            out_b.append(y)
    return out_a, out_b


def _folders(cfg: ParallelDataConfig) -> list[Path]:
    if cfg.path is not None:
        return [Path(cfg.path).expanduser()]
    if cfg.name == "parallel-files":
        return []
    data = data_root(cfg)
    return ([data / cfg.name] if data else []) + [cache_root(cfg) / cfg.name]


def _find_pair(folders: list[Path], stems: tuple[str, ...], src: str,
               tgt: str) -> tuple[Path, Path] | None:
    for folder in folders:
        for stem in stems:
            a, b = folder / f"{stem}.{src}", folder / f"{stem}.{tgt}"
            if a.is_file() and b.is_file():
                return a, b
    return None


def fetch_parallel(spec: ParallelSpec, dest: Path, *, base: str | None = None) -> list[Path]:
    """Download ``spec``'s ``.gz`` files (each verified against its known hash) and
    decompress them, streamed, into ``dest``; files already there are kept.

    ``base`` (else ``$SUBLAYER_DOWNLOAD_BASE``) replaces everything before the file name.
    """
    if not spec.urls:
        raise DataError(f"{spec.name}: this corpus cannot be downloaded; {spec.note}")
    placed = []
    with staging(dest.parent) as tmp:
        for target, url in spec.urls.items():
            if (dest / target).is_file():
                continue
            url = rebase_url(url, base)
            packed = retrieve(url, spec.hashes[target], folder=tmp,
                              fname=url.rsplit("/", 1)[-1], what=spec.name)
            gunzip(packed, tmp / target, f"{spec.name}: {url}")
            os.remove(packed)
            placed.append(place(tmp / target, dest, target))
    return placed


def resolve_parallel_files(cfg: ParallelDataConfig) -> dict[str, tuple[Path, Path]]:
    """Split -> (source file, target file); train and valid are required, test optional."""
    spec = parallel_info(cfg.name)
    src, tgt = cfg.src_lang, cfg.tgt_lang
    assert src is not None and tgt is not None
    found: dict[str, tuple[Path, Path]] = {}
    for split in SPLITS:
        a, b = getattr(cfg, f"{split}_src"), getattr(cfg, f"{split}_tgt")
        if a is not None:
            for name, value in ((f"{split}_src", a), (f"{split}_tgt", b)):
                if not Path(value).expanduser().is_file():
                    raise setting_error(name, value, "an existing file")
            found[split] = (Path(a).expanduser(), Path(b).expanduser())
    folders = _folders(cfg)

    def search() -> None:
        for split in SPLITS:
            if split not in found and (hit := _find_pair(folders, spec.stems[split], src, tgt)):
                found[split] = hit

    search()
    failure = None
    if ("train" not in found or "valid" not in found) and spec.urls and cfg.download \
            and cfg.path is None:
        try:
            fetch_parallel(spec, cache_root(cfg) / cfg.name)
        except DataError as exc:
            failure = str(exc)
        search()
    missing = [s for s in ("train", "valid") if s not in found]
    if missing:
        wanted = "; ".join(f"{spec.stems[s][0]}.{src} and {spec.stems[s][0]}.{tgt} ({s} split)"
                           for s in missing)
        looked = ", ".join(str(f) for f in folders) or "(no folder: give the file paths)"
        data, cache = data_root(cfg), cache_root(cfg)
        target = data / cfg.name if data else f"<data dir>/{cfg.name} (${ENV_DATA_DIR} is unset)"
        msg = (f"{cfg.name}: cannot find {wanted}. Looked in: {looked}. Place the files in "
               f"{target} or {cache / cfg.name}" + (f" ({spec.note})." if spec.note else "."))
        if failure:
            msg += f" Download failed: {failure}"
        raise DataError(msg)
    return found
