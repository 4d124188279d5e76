"""The verifiers plugin id `openenv-trainers-verifiers`: `vf-eval openenv-trainers-verifiers ...`.

verifiers resolves a taskset id to a top-level module and reads its `__all__` for one `Taskset`,
one `Env` and one `Harness` subclass; the adapter itself is `openenv_trainers.adapters.verifiers`.
"""

from openenv_trainers.adapters.verifiers import OpenEnvEnv, OpenEnvHarness, OpenEnvTaskset

__all__ = ["OpenEnvEnv", "OpenEnvHarness", "OpenEnvTaskset"]
