"""The report's output: figures (PNG + SVG), one CSV per table, a one-page HTML.

Layout of ``out_dir``: ``figures/<name>.png|.svg``, ``tables/<name>.csv``, ``report.html``.
The report's sections (:mod:`analysis.report.sections`) fill a :class:`Writer`.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

__all__ = ["Report", "Section", "Writer"]


_CSS = (
    "body{font-family:sans-serif;max-width:1100px;margin:auto} img{max-width:49%} "
    "td,th{padding:2px 8px;text-align:left} table{border-collapse:collapse} "
    "tr:nth-child(even){background:#f4f4f4}"
)


@dataclass(frozen=True, kw_only=True)
class Report:
    """Paths written by a report and its key numbers (label -> value)."""

    out_dir: Path
    html: Path
    figures: tuple[Path, ...]
    tables: tuple[Path, ...]
    numbers: dict[str, object]


@dataclass
class Section:
    """One ``<h2>`` of the report: text, key numbers, figures, CSV tables, inline tables."""

    title: str
    text: str = ""
    figures: list[str] = field(default_factory=list)
    numbers: list[tuple[str, object]] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    inline: list[tuple[str, pd.DataFrame]] = field(default_factory=list)


class Writer:
    """Collects sections, saves figures and tables as they come, writes the HTML last."""

    def __init__(self, out_dir: str | Path, title: str) -> None:
        self.out = Path(out_dir)
        self.title = title
        self.sections: list[Section] = []
        self.figures: list[Path] = []
        self.tables: list[Path] = []
        (self.out / "figures").mkdir(parents=True, exist_ok=True)
        (self.out / "tables").mkdir(parents=True, exist_ok=True)

    def section(self, title: str, text: str = "") -> Section:
        self.sections.append(Section(title, text))
        return self.sections[-1]

    def figure(self, section: Section, name: str, fig: Figure) -> None:
        for ext in ("png", "svg"):
            path = self.out / "figures" / f"{name}.{ext}"
            fig.savefig(path, dpi=120 if ext == "png" else None)
            self.figures.append(path)
        plt.close(fig)
        section.figures.append(name)

    def table(self, section: Section, name: str, frame: pd.DataFrame, *,
              index: bool = False) -> None:
        path = self.out / "tables" / f"{name}.csv"
        frame.to_csv(path, index=index)
        self.tables.append(path)
        section.tables.append(name)

    def published(self, section: Section, tables: dict[str, pd.DataFrame], *,
                  skip: tuple[str, ...], prefix: str = "") -> None:
        """Each of a paper's published ``tables`` (but ``skip``) as a CSV and inline."""
        for name, table in tables.items():
            if name not in skip:
                self.table(section, f"{prefix}{name}", table)
                section.inline.append((name.replace("_", " "), table))

    def numbers(self) -> dict[str, object]:
        return {f"{s.title}: {k}": v for s in self.sections for k, v in s.numbers}

    def write(self) -> Report:
        path = self.out / "report.html"
        path.write_text(self._html(), encoding="utf-8")
        return Report(out_dir=self.out, html=path, figures=tuple(self.figures),
                      tables=tuple(self.tables), numbers=self.numbers())

    def _html(self) -> str:
        esc = html.escape
        parts = [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{esc(self.title)}</title><style>{_CSS}</style></head><body>",
            f"<h1>{esc(self.title)}</h1>",
        ]
        for s in self.sections:
            parts.append(f"<h2>{esc(s.title)}</h2>")
            if s.text:
                parts.append(f"<p>{esc(s.text)}</p>")
            if s.numbers:
                parts.append("<table>")
                parts += [f"<tr><th>{esc(k)}</th><td>{esc(_fmt(v))}</td></tr>" for k, v in
                          s.numbers]
                parts.append("</table>")
            parts += [f"<img src='figures/{esc(n)}.svg' alt='{esc(n)}'>" for n in s.figures]
            for caption, frame in s.inline:
                parts.append(f"<h3>{esc(caption)}</h3>")
                parts.append(_blank_missing(frame).to_html(index=False))
            if s.tables:
                links = ", ".join(f"<a href='tables/{esc(n)}.csv'>{esc(n)}.csv</a>"
                                  for n in s.tables)
                parts.append(f"<p>Tables: {links}</p>")
        parts.append("</body></html>")
        return "\n".join(parts)


def _blank_missing(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.astype(object).map(lambda v: "" if v is None or v is pd.NA or (
        isinstance(v, float) and math.isnan(v)) else _fmt(v))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.4g}"
    return str(value)
