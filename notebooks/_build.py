"""Generate the analysis notebooks (run: ``python notebooks/_build.py``).

Every cell calls ``analysis`` functions; the notebooks hold no analysis logic. The tests
execute the committed notebooks with nbclient and check they match this generator.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

_SWEEP_ENV = '''import os

experiment = os.environ.get("SUBLAYER_NOTEBOOK_EXPERIMENT")
tracking_uri = os.environ.get("SUBLAYER_NOTEBOOK_TRACKING_URI") or os.environ.get(
    "MLFLOW_TRACKING_URI")
print("sweep:", experiment or "none (set SUBLAYER_NOTEBOOK_EXPERIMENT to analyse one)")'''


def distribution_study() -> list:
    return [
        new_markdown_cell(
            "# Distribution study (Press et al. 2020, Fig. 2, 3 and 4)\n\n"
            "Random orders against the baseline seeds, then the bottom/top halves by "
            "parameter count. First the paper's own numbers (Tables 1 and 2), then a sweep "
            "of ours when `SUBLAYER_NOTEBOOK_EXPERIMENT` (and optionally "
            "`SUBLAYER_NOTEBOOK_TRACKING_URI`) is set."),
        new_code_cell("from sublayer_search.analysis import distribution, halves_study, paper, plots"),
        new_markdown_cell("## Fig. 2: Table 1, 20 random permutations of 16 s + 16 f"),
        new_code_cell("table1 = paper.table1()\ninfo1 = distribution(table1)\ninfo1.summary()"),
        new_code_cell("plots.plot_distribution(info1);"),
        new_markdown_cell("## Fig. 3: Table 2, 20 parameter-budgeted random models"),
        new_code_cell("info2 = distribution(paper.table2())\ninfo2.summary()"),
        new_code_cell("plots.plot_distribution(info2);"),
        new_markdown_cell(
            "## Fig. 4: bottom / top halves, Tables 1 and 2 pooled\n\nAs the paper defines "
            "it: all 40 random models, split by the average of the five baselines. Better "
            "models have more `s` in the bottom half and more `f` in the top half."),
        new_code_cell("fig4 = halves_study(paper.pooled_trials())\nfig4.group_sizes()"),
        new_code_cell("fig4.means.pivot_table(index=['group', 'half'], columns='kind', "
                      "values='mean')"),
        new_code_cell("plots.plot_halves(fig4);"),
        new_code_cell("fig4.mann_whitney, fig4.spearman"),
        new_code_cell("plots.plot_position_map(fig4);"),
        new_markdown_cell("### Fig. 4 for Table 1 alone"),
        new_code_cell("halves1 = halves_study(table1)\nhalves1.means.pivot_table("
                      "index=['group', 'half'], columns='kind', values='mean')"),
        new_code_cell("plots.plot_halves(halves1);"),
        new_markdown_cell("## A sweep from MLflow"),
        new_code_cell(_SWEEP_ENV),
        new_code_cell(
            "if experiment:\n"
            "    from sublayer_search.analysis import runs\n\n"
            "    sweep = runs.load(experiment, tracking_uri)\n"
            "    sweep_info = distribution(sweep)\n"
            "    display(sweep_info.summary())\n"
            "    plots.plot_distribution(sweep_info)\n"
            "    plots.plot_halves(halves_study(sweep))"),
        new_markdown_cell(
            "## Hybrid orders: the shipped `hybrid_mini` study\n\nAttention (`s`) among "
            "gated linear recurrences (`r`) and feedforwards (`f`): each kind counted per "
            "half by parameter count and its bottom-half count tested (better vs not, "
            "Holm-adjusted over the kinds), then the metric against where attention sits "
            "and how much of it (Spearman, bootstrap intervals, Holm-adjusted)."),
        new_code_cell(
            "from sublayer_search.analysis.store.study_export import builtin_export\n"
            "from sublayer_search.analysis.studies.attention_depth import "
            "attention_depth_study\n\n"
            "hybrid = builtin_export('hybrid_mini').trials\n"
            "hybrid_halves = halves_study(hybrid)\n"
            "hybrid_halves.per_kind"),
        new_code_cell("plots.plot_halves(hybrid_halves);"),
        new_code_cell("attention_depth_study(hybrid).tests"),
    ]


def sandwich_coefficient() -> list:
    return [
        new_markdown_cell(
            "# Sandwich coefficient (Press et al. 2020, Fig. 5)\n\n"
            "sandwich^n_k = `s^k (sf)^(n−k) f^k`. The paper states dev perplexities only for "
            "k = 6 (17.84) and k = 15 (18.82); for the other k it states which beat the "
            "average / best baseline."),
        new_code_cell("from sublayer_search.analysis import paper, plots, sandwich_curve, "
                      "seed_comparison_from_stats"),
        new_code_cell("info = sandwich_curve(paper.sandwich_points())\ninfo.points"),
        new_code_cell("statements = paper.sandwich_statements()\nstatements"),
        new_markdown_cell(
            "The figure's title says only what a test supports (`leaders`, `headline`): "
            "with one published value per k there is no test, so no best k is claimed."),
        new_code_cell("plots.plot_sandwich(info, statements=statements);"),
        new_markdown_cell(
            "## Fig. 6: sandwich^16_6 over 5 seeds (17.98 ± 0.10) against the baseline\n\n"
            "Only summary statistics are published, so the test is Welch's t from them "
            "(no bootstrap). The statement gives the p-value adjusted for the number of "
            "comparisons (Holm), the difference with its interval, the baseline's seed sd "
            "and the seeds per arm for 80% power."),
        new_code_cell("seeds = seed_comparison_from_stats(paper.sandwich_seed_summary())\n"
                      "print(seeds.table.loc[0, 'statement'])"),
        new_code_cell("plots.plot_seeds(seeds);"),
        new_markdown_cell(
            "## This product's sandwiches over seeds (`mini_press2020`, shipped data)\n\n"
            "Every k trained seeds 0–2, which the baseline also trained (it has seeds "
            "0–7). A seed fixes the batch order but not the initial weights, so the "
            "pairing is not real: Welch's t over all 8 baseline seeds decides "
            "(`decides`), Holm over the 5 k, and the paired t-test over seeds 0–2 stands "
            "beside it, never deciding. The same rule picks the test that compares the "
            "best k with the others."),
        new_code_cell(
            "from sublayer_search.analysis import builtin_export, leaders, seed_comparison\n\n"
            "mini = builtin_export('mini_press2020').trials\n"
            "mini = mini[(mini['family'] == 'sandwich') | mini['baseline']]\n"
            "mini_seeds = seed_comparison(mini)\n"
            "mini_seeds.table[['name', 'welch_p_adjusted', 'welch_verdict', "
            "'paired_p_adjusted', 'paired_verdict', 'decides']]"),
        new_code_cell(
            "mini_info = sandwich_curve(mini)\n"
            "leaders(mini_info)[['k', 'mean', 'welch_p_adjusted', 'paired_p_adjusted', "
            "'decides', 'told_apart']]"),
        new_code_cell("plots.plot_sandwich(mini_info);"),
        new_markdown_cell("## A sandwich sweep from MLflow"),
        new_code_cell(_SWEEP_ENV),
        new_code_cell(
            "if experiment:\n"
            "    from sublayer_search.analysis import runs\n\n"
            "    sweep_info = sandwich_curve(runs.load(experiment, tracking_uri))\n"
            "    display(sweep_info.points)\n"
            "    display(leaders(sweep_info))\n"
            "    plots.plot_sandwich(sweep_info)"),
    ]


def attention_distance() -> list:
    return [
        new_markdown_cell(
            "# Attention distance (Press et al. 2020, Table 7)\n\n"
            "Per token and self-attention sublayer, heads of two models are matched with the "
            "Hungarian algorithm minimising the summed earth mover's distance; the result is "
            "averaged over tokens and layers. Here on small synthetic attention arrays; for "
            "real models use `models.attention_capture.capture(model, idx)` (or `run_attention(run_id, …)` on a logged checkpoint) or "
            "`tiny_model_attention(order)`."),
        new_code_cell("from sublayer_search.analysis import distance_table, group_distances, paper, plots, "
                      "synthetic_attention"),
        new_code_cell(
            "models = {\n"
            "    'baseline_a': synthetic_attention(4, heads=4, context=16, seed=0, "
            "locality=1.0),\n"
            "    'baseline_b': synthetic_attention(4, heads=4, context=16, seed=1, "
            "locality=1.0),\n"
            "    'sandwich_a': synthetic_attention(4, heads=4, context=16, seed=2, "
            "locality=0.2),\n"
            "    'sandwich_b': synthetic_attention(4, heads=4, context=16, seed=3, "
            "locality=0.2),\n"
            "}\n"
            "table = distance_table(models)\ntable"),
        new_code_cell("group_distances(table, {'baseline_a': 'baseline', 'baseline_b': "
                      "'baseline', 'sandwich_a': 'sandwich', 'sandwich_b': 'sandwich'})"),
        new_code_cell("plots.plot_attention_distances(table);"),
        new_markdown_cell("## The paper's Table 7 (WikiText-103 models)"),
        new_code_cell("paper.attention_distances()"),
    ]


NOTEBOOKS = {
    "01_distribution_study.ipynb": distribution_study,
    "02_sandwich_coefficient.ipynb": sandwich_coefficient,
    "03_attention_distance.ipynb": attention_distance,
}


def build(out_dir: Path = HERE) -> list[Path]:
    """Write the notebooks (unexecuted) into ``out_dir``; return their paths."""
    paths = []
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells())
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        path = Path(out_dir) / name
        nbformat.write(nb, path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(p)
