"""Golden texts: what a user sees (a dry run's tables, the message of a bad file), kept in
``tests/search/golden/`` so that a refactor that changes any of it fails a test.

``SUBLAYER_WRITE_GOLDEN=1 pytest …`` (re)writes the files instead of comparing; review
the diff (``git diff tests/search/golden``) before committing it. Paths that differ
between machines (the test's folder, ``$HOME``, the data folder) and this machine's CPU
and GPU counts and local ports are replaced by placeholders first.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"
WRITE = os.environ.get("SUBLAYER_WRITE_GOLDEN") == "1"


def normalise(text: str, **paths: Path | str) -> str:
    """``text`` with each given path replaced by ``{name}``, and ``$HOME``, the data folder
    and this machine's CPU and GPU counts by ``{home}``, ``{data}``, ``{cpus}``, ``{gpus}``."""
    named = {**paths, "data": os.environ.get("SUBLAYER_DATA_DIR", ""),
             "home": os.environ.get("HOME", "")}
    for name, path in sorted(named.items(), key=lambda kv: -len(str(kv[1]))):
        if str(path) and str(path) != "/":
            text = text.replace(str(path), "{" + name + "}")
    cpus = os.cpu_count() or 1
    text = re.sub(rf"\bat most {cpus} \(CPUs", "at most {cpus} (CPUs", text)
    text = re.sub(rf"\bat most {_gpus()} \(GPUs", "at most {gpus} (GPUs", text)
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:{port}", text)


def _gpus() -> int:
    import torch

    return int(torch.cuda.device_count())


def key_of_current_test() -> str:
    """A file name for the running test: ``test_bad_input.test_x[case-id]``."""
    node = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
    path, _, name = node.partition("::")
    return f"{Path(path).stem}.{name}".replace("/", "_").replace("::", ".")


_CALLS: dict[str, int] = {}


def _one_of(names: list[str]) -> str:
    quoted = [repr(n) for n in names]
    return f"{', '.join(quoted[:-1])} or {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def registries(text: str) -> str:
    """``text`` with each full listing of a registry (``'fifo', 'asha' or 'curve'``)
    replaced by ``{spaces}``, ``{searchers}``, ``{rules}`` or ``{tasks}``: a strategy added
    in the tree or by a plugin changes no golden text (CONTRIBUTING's recipes)."""
    from sublayer_search.search.searchers.registry import searcher_names
    from sublayer_search.search.stopping.registry import rule_names
    from sublayer_search.search.tasks import task_names
    from sublayer_search.spaces.registry import ALL_SPACES

    for name, names in (("spaces", list(ALL_SPACES)), ("searchers", list(searcher_names())),
                        ("rules", list(rule_names())), ("tasks", list(task_names()))):
        text = text.replace(_one_of(names), "{" + name + "}")
    return text


def check(kind: str, text: str, key: str | None = None) -> None:
    """``text`` equals the golden file ``golden/KIND/KEY.txt`` (or writes it); the n-th
    call of one test (from 2) adds ``.n`` to the key."""
    key = key or key_of_current_test()
    text = registries(text)
    _CALLS[key] = n = _CALLS.get(key, 0) + 1
    path = GOLDEN / kind / f"{key}{'' if n == 1 else f'.{n}'}.txt"
    if WRITE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"no golden text {path}: write it with SUBLAYER_WRITE_GOLDEN=1"
    want = path.read_text()
    assert text == want, f"{kind} changed from {path}:\n--- want\n{want}\n--- got\n{text}"
