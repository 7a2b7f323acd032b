"""Bad experiment files of issue 30's classes, for ``test_bad_input.py``: planning that is
itself the attack, absurd magnitudes, strings for true/false, a description beyond MLflow's
tag limit, unwritable stores, every model problem at once, an address where nothing
listens, and a train config handed to ``sweep``. ``within``: the refusal's time limit."""

from __future__ import annotations

from bad_input_cases import Bad, _raw, _set, _space

LIMIT_CASES = [
    Bad("huge-permutation-space", _space({"type": "permutations", "n_s": 500, "n_f": 500,
                                          "count": 100_000}),
        ("space.count: got 100000, expected a plan of at most 100,000 trials and 2,000,000 "
         "sublayers in all", "100,000,000 sublayers"), within=2.0),
    Bad("huge-permutation-spaces-listed", _space([{"type": "permutations", "n_s": 300,
                                                   "n_f": 300, "count": 60_000}] * 30),
        ("expected a plan of at most 100,000 trials",), within=2.0),
    Bad("huge-budgeted-space", _space({"type": "budgeted", "budget_units": 1023,
                                       "count": 100_000}),
        ("space.count: got 100000, expected a plan of at most",), within=2.0),
    Bad("steps-absurd", _set("train.steps", 10**30),
        ("train.steps: got 1000000000000000000000000000000, expected an integer of at most "
         "1,000,000,000",), within=5.0),
    Bad("seed-absurd", _set("seeds", [10**20]),
        ("seeds[0]: got 100000000000000000000, expected an integer of at most 4,294,967,295",)),
    Bad("model-vocab-absurd", _set("model.vocab_size", 10**30),
        ("model.vocab_size: got 1000000000000000000000000000000, expected an integer of at "
         "most 2**53",)),
    Bad("download-yes", _set("data.download", "yes"),
        ("data.download: got 'yes', expected true or false, not a string",)),
    Bad("tolerate-yes", _set("failure", {"tolerate": "yes"}),
        ("failure.tolerate: got 'yes', expected true or false, not a string",)),
    Bad("baseline-enabled-number", _set("baseline", {"enabled": 1}),
        ("baseline.enabled: got 1, expected true or false, not a number",)),
    Bad("description-beyond-mlflow-tag", _set("description", "x" * 8001),
        ("description: got 'xxx", "expected a description of at most 8,000 characters (MLflow's "
         "limit for a tag; this one has 8,001",)),
    Bad("tracking-in-proc", _set("tracking.uri", "sqlite:////proc/no_such/mlflow.db"),
        ("tracking.uri: got 'sqlite:////proc/no_such/mlflow.db', expected a SQLite file in a "
         "writable folder (/proc is not writable)",)),
    Bad("storage-in-proc", _set("ray.storage_path", "/proc/no_such/ray"),
        ("ray.storage_path: got '/proc/no_such/ray', expected a writable folder (/proc is not "
         "writable)",)),
    Bad("model-problems-together", _set("model", {"preset": "debug", "d_model": 30,
                                                  "n_heads": 4, "dropout": 3,
                                                  "activation": "swish", "vocab_size": 1}),
        ("4 problem(s)", "model.d_model: got 30, expected a multiple of n_heads (4)",
         "model.dropout: got 3, expected a number in [0, 1)",
         "model.activation: got 'swish', expected one of relu, gelu",
         "model.vocab_size: got 1, expected an integer >= 2 or null")),
    Bad("ray-address-nothing-listens", _set("ray.address", "127.0.0.1:1"),
        ("ray.address: got '127.0.0.1:1', expected a reachable Ray cluster",), within=8.0),
    Bad("train-config-as-sweep", _raw("model: {preset: tiny}\ndata: {name: tinyshakespeare}\n"
                                      "train: {steps: 20}\n"),
        ("<file>: this is a `sublayer train --config` file (only data/model/train sections), "
         "not an experiment file", "sublayer train --order ORDER --config {tmp}/experiment.yaml")),
]
