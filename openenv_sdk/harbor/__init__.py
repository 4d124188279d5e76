"""Harbor (Terminal-Bench 2) task folders, imported into the terminal environment's task format.

- `import_harbor_task`: one task folder -> `tasks/<id>/` (what the agent's side holds) and
  `hidden/<id>/` (the check that runs the task's `tests/test.sh`, and its solutions).
- `read_harbor_task`: the folder, read (instruction, `task.toml`'s tables).
- `HarborImportError`: a task that cannot be mapped, with every reason.

`openenv harbor import TASK_DIR... --into environments/terminal/tasks` is the same from the
command line. docs/harbor.md says what maps, what is changed, and what is refused.
"""

from ._convert import HarborImportError, ImportReport, import_harbor_task
from ._task import HarborTask, read_harbor_task

__all__ = ["HarborImportError", "HarborTask", "ImportReport", "import_harbor_task", "read_harbor_task"]
