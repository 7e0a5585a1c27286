"""Run untrusted Python: `Sandbox` (async, limited, isolated) and `detect_isolation`."""

from tracegen.sandbox.base import IsolationInfo, SandboxLimits
from tracegen.sandbox.isolation import detect_isolation
from tracegen.sandbox.runner import Sandbox

__all__ = ["IsolationInfo", "Sandbox", "SandboxLimits", "detect_isolation"]
