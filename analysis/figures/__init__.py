"""Matplotlib figures (Agg backend) drawn from the studies' ``…Info`` results; no logic of
their own."""
