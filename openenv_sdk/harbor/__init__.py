"""Harbor (Terminal-Bench 2) task folders, imported into the terminal environment's task format.

- `import_harbor_task`: one task folder -> `tasks/<id>/` (what the agent's side holds) and
  `hidden/<id>/` (the check that runs the task's `tests/test.sh`, and its solutions).
- `read_harbor_task`: the folder, read (instruction, `task.toml`'s tables).
- `HarborImportError`: a task that cannot be mapped, with every reason; `HarborNameError` (a
  name that is not `org/name`), `HarborSizeError` (over a limit of docs/harbor.md) and
  `HarborComposeError` (compose keys outside the supported subset) narrow it.
- `build_task_image`: the image of a task imported with its own image (`own_image=True`): its
  Dockerfile (and compose file) built on the environment's server image.
- `verify_imported`: play imported tasks through their environment's server (the reference
  solution must score 1.0, doing nothing 0.0).

`openenv harbor import TASK_DIR... --into environments/terminal/tasks` is the same from the
command line. docs/harbor.md says what maps, what is changed, and what is refused.
"""

from ._convert import ImportReport, import_harbor_task
from ._errors import HarborComposeError, HarborImportError, HarborNameError, HarborSizeError
from ._image import build_task_image
from ._task import HarborTask, read_harbor_task
from ._verify import Verification, verify_imported

__all__ = [
    "HarborComposeError",
    "HarborImportError",
    "HarborNameError",
    "HarborSizeError",
    "HarborTask",
    "ImportReport",
    "Verification",
    "build_task_image",
    "import_harbor_task",
    "read_harbor_task",
    "verify_imported",
]
