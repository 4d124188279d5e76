"""Black-box agents in the sandbox: their model calls intercepted on the host, answered by the policy."""

from .server import InterceptedRequest, InterceptionServer, Rollout, RolloutClosed

__all__ = ["InterceptedRequest", "InterceptionServer", "Rollout", "RolloutClosed"]
