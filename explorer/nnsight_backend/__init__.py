"""The explorer on a model that nnsight runs: locally (the model in this process, wrapped by nnsight's
`TransformersModel`), or on NDIF's shared GPUs (`remote=True`, nnsight's remote tracing).

    ex = explorer.load("path/or/org-name", backend="nnsight")               # local, every forward traced
    ex = explorer.load("meta-llama/Llama-3.1-70B", backend="nnsight", remote=True)   # NDIF_API_KEY

families   the module names nnsight sees in each family, mapped once onto our taps' points
forward    one forward as one nnsight trace: our `Taps` read and written at those points
weights    each layer's weights as our `Block`, fetched once (from the model here, as saved tensors from
           NDIF) and kept within a budget
traced     `TracedTransformer`, the stand-in for our `Transformer` that the engine calls
loader     `load_checkpoint`: the checkpoint behind `explorer.load(..., backend="nnsight")`

Everything a view needs beyond the saved activations is ours, as with our own engine: the eager rerun,
RoPE, GQA, the lens, attribution and the reruns of blocks from a cached layer input. nnsight itself is
an optional dependency (`pip install .[ndif]`), imported only when this backend loads a model.
"""
