"""tracegen: executed reasoning traces for training code-writing language models."""

__version__ = "0.1.0"
