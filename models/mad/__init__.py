"""The MAD proxy (Poli et al., 2024): six synthetic tasks that rank sequence-model designs
in minutes. :mod:`.settings` (no torch) holds the tasks, difficulties and protocols,
:mod:`.generate` the samples, :mod:`.workload` the training of an order on them."""
