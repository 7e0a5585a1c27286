"""Helpers tests import (fixtures live in the conftest files)."""
