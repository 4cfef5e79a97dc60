"""The engine, torch only: the model and its one forward with taps (`model`), RoPE (`rope`), the config
(`config`), KV caches (`kv_cache`), the eager rerun of a layer (`attention`, `blockwise`), tokens, runs
(`run`), the loaded model (`explorer`: `Explorer`, `load`), generation, interventions and head scores."""
