"""``--models DIR`` on ``rocky run`` and ``rocky ci``: point the transformation pipeline at a directory.

Upstream Rocky's clients (``rocky_sdk``'s ``run(run_models=True)`` and ``ci()``) send ``--models DIR``;
its meaning there is "the models live in DIR". Here a transformation pipeline names its models with a
glob relative to rocky.toml, so the flag replaces that glob by ``DIR/**`` for this one invocation. DIR is
taken relative to the working directory, like every other path flag (``--config``, ``--state-path``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rocky_engine.errors import UsageError

if TYPE_CHECKING:
    from rocky_engine.config import RockyConfig


def point_models_at(config: RockyConfig, directory: str, requested: str | None) -> str:
    """Make the transformation pipeline read its models from ``directory``; return that pipeline's name.

    ``requested`` is ``--pipeline`` (None: the project's one transformation pipeline, so an upstream
    client that never sends ``--pipeline`` still reaches it in a project that also replicates).

    Raises:
        UsageError: ``directory`` is not a directory, ``requested`` is not a transformation pipeline, or
            none / several transformation pipelines exist and ``--pipeline`` does not choose.
    """
    from rocky_engine.config import TransformationPipeline

    path = Path(directory).expanduser().absolute()
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise UsageError(f"--models {directory}: {path} {what}",
                         hint="pass the directory that holds the model .sql files")
    names = [n for n, p in config.pipelines.items() if isinstance(p, TransformationPipeline)]
    if requested is not None:
        pipeline = config.pipeline(requested)  # raises with the list of names
        if not isinstance(pipeline, TransformationPipeline):
            raise UsageError(
                f"--models applies to transformation pipelines; pipeline '{requested}' is a "
                f"{pipeline.type} pipeline",
                hint="drop --models, or choose a transformation pipeline with --pipeline",
            )
        name = requested
    elif len(names) == 1:
        name = names[0]
    elif not names:
        raise UsageError(
            "--models needs a transformation pipeline, and rocky.toml defines none",
            hint='add [pipeline.NAME] with type = "transformation"',
        )
    else:
        raise UsageError(
            f"--models: several transformation pipelines ({', '.join(names)})",
            hint="choose one with --pipeline NAME",
        )
    current = config.pipelines[name]
    assert isinstance(current, TransformationPipeline)
    config.pipelines[name] = current.model_copy(update={"models": str(path / "**")})
    return name
