"""Problem sets: shipped ones, HumanEval/MBPP/GSM8K, and tracegen JSONL/YAML files."""

from tracegen.problems.loader import load_problems

__all__ = ["load_problems"]
