"""The documentation's example experiments are the shipped files, not copies that drift."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from sublayer_search.search.cli.main import main

REPO = Path(__file__).resolve().parents[1]
DOCS = ("README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")))


def yaml_blocks(text: str) -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```", text, flags=re.S | re.M)


def whole_experiments() -> list[tuple[str, str]]:
    """(document, block) for every ```yaml block that is a whole experiment (has a name)."""
    found = []
    for name in DOCS:
        for block in yaml_blocks((REPO / name).read_text()):
            data = yaml.safe_load(block)
            if isinstance(data, dict) and "name" in data:
                found.append((name, block))
    return found


def test_every_whole_example_experiment_is_a_shipped_file() -> None:
    shipped = {p.read_text(): p.name for p in (REPO / "configs").rglob("*.yaml")}
    examples = whole_experiments()
    assert any(doc == "docs/experiments.md" for doc, _ in examples), examples
    drifted = [doc for doc, block in examples if block not in shipped]
    assert not drifted, f"example experiments that are no shipped configs/ file: {drifted}"


def test_the_quickstart_the_readme_describes_is_the_shipped_one() -> None:
    readme = (REPO / "README.md").read_text()
    quickstart = yaml.safe_load((REPO / "configs" / "quickstart.yaml").read_text())
    assert "`configs/quickstart.yaml`" in readme
    assert quickstart["name"] == "quickstart" and quickstart["baseline"] == {"seeds": 3}
    assert "the interleaved baseline with 3 seeds" in readme


@pytest.mark.parametrize("doc_block", [b for _, b in whole_experiments()])
def test_each_example_experiment_plans(doc_block: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "example.yaml"
    path.write_text(doc_block)
    assert main(["sweep", str(path), "--dry-run"]) == 0, capsys.readouterr().err
    assert "nothing was run" in capsys.readouterr().out
