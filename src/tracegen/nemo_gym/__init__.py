"""tracegen's judge as a NeMo-Gym resources server (``pip install 'tracegen[nemo-gym]'``,
Python ≥ 3.13.14 as nemo-gym requires; docs/rl.md): `TracegenResourcesServer`."""

from tracegen.nemo_gym.server import (
    TracegenResourcesServer,
    TracegenResourcesServerConfig,
    TracegenVerifyRequest,
    TracegenVerifyResponse,
)

__all__ = [
    "TracegenResourcesServer",
    "TracegenResourcesServerConfig",
    "TracegenVerifyRequest",
    "TracegenVerifyResponse",
]
