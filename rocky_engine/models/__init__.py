"""Transformation model files (.sql + .toml sidecars) and the DAG built from them."""

from __future__ import annotations

from rocky_engine.models.dag import ModelSet
from rocky_engine.models.loader import load_models, models_base_dir
from rocky_engine.models.model import Model, ModelTarget, Strategy

__all__ = ["Model", "ModelSet", "ModelTarget", "Strategy", "load_models", "models_base_dir"]
