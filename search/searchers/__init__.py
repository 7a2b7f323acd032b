"""Search algorithms over orders (Ray Tune ``Searcher`` s): the registry of what each can do
(``registry``, one declaration per ``search.algorithm`` in ``algorithms/``), the shared base
with its hooks (``base``), grid/evolution (``tune``), Optuna studies, the order-aware
surrogate, priors and warm start from earlier studies, and recorded tables as an oracle
for benchmarks."""
