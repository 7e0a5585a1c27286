"""Helpers that tests import (never from a conftest)."""
