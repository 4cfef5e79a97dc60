"""The engine, torch only: the model and its one forward with taps (`model`), RoPE (`rope`), the config
(`config`), KV caches (`kv_cache`), the eager rerun of a layer (`attention`, `blockwise`), tokens, runs
(`run`), generation, interventions and head scores. It imports neither the loading code nor the app:
`explorer.explorer` (`Explorer`, `load`) stands above both."""
