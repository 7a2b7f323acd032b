"""Search algorithms over orders (Ray Tune ``Searcher`` s): the shared base, random/grid/
evolution (``tune``), Optuna studies, the order-aware surrogate, warm start from earlier
sweeps, and recorded tables as an oracle for benchmarks."""
