"""What `tracegen stats --by` breaks the figures down by: each name it takes and the trace
field that names the group (kept apart from `tracegen.views.stats` so that ``stats --help``
lists them without importing it)."""

from __future__ import annotations

BY_KEYS = {"mode": "mode", "model": "model", "problem": "problem_id"}
