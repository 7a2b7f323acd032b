"""Encoder–decoder models: the ordered seq2seq transformer and its config, decoding, the IOT
model and its config, and the translation workload (``translation_workload``)."""
