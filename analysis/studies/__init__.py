"""Pure study functions over tidy frames: each returns an ``…Info`` dataclass that the
figures draw and the reports write (significance tests, sandwich curves, halves, seeds,
pooling, replication, guidance, IOT, attention distances, Pareto fronts)."""
