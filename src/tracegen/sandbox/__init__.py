"""Run untrusted Python: `Sandbox` (async, limited, isolated) and `detect_isolation`."""

from tracegen.sandbox.base import IsolationInfo, SandboxLimits
from tracegen.sandbox.executor import Sandbox
from tracegen.sandbox.isolation import detect_isolation

__all__ = ["IsolationInfo", "Sandbox", "SandboxLimits", "detect_isolation"]
