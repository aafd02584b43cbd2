"""The subcommands of ``trainkit`` and their one-line help (a leaf: the parser and --help read it)."""

SUBCOMMANDS = {
    "fit": "Train a model; --ckpt_path last resumes the latest run.",
    "validate": "Run the validation set once (--ckpt_path last|best|PATH).",
    "test": "Run the test set once (--ckpt_path last|best|PATH).",
    "predict": "Run predict_step over the predict set and save predictions.pt.",
}
