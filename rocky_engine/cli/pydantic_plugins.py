"""Pydantic's plugin discovery, switched off for the ``rocky`` process (the entry point only).

Rocky uses no pydantic plugins. Discovering them scans the metadata of every installed distribution before
the first model is built (~10-30 ms per process, more in a large environment): ``PYDANTIC_DISABLE_PLUGINS``
skips the scan, a value the user set wins. Pydantic's loader module still imports ``importlib.metadata``
(and with it ``email``, ``zipfile``, ``csv``, ``importlib.resources``, ``tempfile``: ~20 ms of CPU, an
eighth of ``rocky validate``) just to be able to scan. While the variable says "no plugins", that module is
replaced by a stand-in whose ``get_plugins`` answers what pydantic's own does then (no plugins) without the
import; anything else asked of it, or a ``get_plugins`` call once the variable no longer disables plugins,
loads the real loader and defers to it, so a pydantic that uses the loader differently still works.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, MutableMapping
from types import ModuleType
from typing import Any

ENV = "PYDANTIC_DISABLE_PLUGINS"
LOADER = "pydantic.plugin._loader"
#: the values for which pydantic's ``get_plugins`` returns no plugin at all (pydantic/plugin/_loader.py)
_ALL_OFF = ("__all__", "1", "true")


def disable_plugins(environ: MutableMapping[str, str]) -> None:
    """Turn plugin discovery off unless the user set ``PYDANTIC_DISABLE_PLUGINS``; children inherit it."""
    environ.setdefault(ENV, "__all__")
    if environ[ENV] in _ALL_OFF and LOADER not in sys.modules:
        sys.modules[LOADER] = _NoPluginLoader(LOADER)


def _real_loader() -> ModuleType:
    if isinstance(sys.modules.get(LOADER), _NoPluginLoader):
        del sys.modules[LOADER]
    return importlib.import_module(LOADER)


class _NoPluginLoader(ModuleType):
    """``pydantic.plugin._loader`` while plugins are disabled: no ``importlib.metadata``."""

    @staticmethod
    def get_plugins() -> Iterable[Any]:
        if os.environ.get(ENV) in _ALL_OFF:
            return ()
        result: Iterable[Any] = _real_loader().get_plugins()
        return result

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system probing a module (``__path__``...): not a request
            raise AttributeError(name)
        return getattr(_real_loader(), name)
