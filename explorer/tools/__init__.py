"""Tools around the product, not part of it: the benchmark (`bench`), the stress run against a served app
(`stress`, `stress_client`) and the training of the bundled model (`training`)."""
