"""Training the bundled model (`python -m explorer.train`, see `__main__`).

config       the training presets
data         the corpus split, the tokenizer, the curriculum's batches
train        the model's config, the optimiser and the loop
measure      what the model card reports, measured on the saved weights
model_card   README.md and loss_curve.png
"""
