"""classify/zeroshot/: the text side of language-augmented models: label sets, prompt recipes and
the cached text classifier with its zero-shot head. It imports no model code (the open_clip source does)."""
