"""Recorded sweeps as plain data: learning curves (``curves``), read from an export
(``from_export``), re-timed as if started in another order (``arrival``). Read by the
replay, by the calibration of comeback stopping and by the benchmarks."""
