"""Checkpoints into the engine's model: the dispatch (`checkpoints`), Hugging Face folders (`folders`),
GGUF files (`gguf`, `gguf_header`), the hub (`hub`), the weights a config implies (`weights`), and the
picker's catalogue of models (`catalog`)."""
