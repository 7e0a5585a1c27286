"""Helpers that tests import."""
