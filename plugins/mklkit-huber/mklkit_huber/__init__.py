"""Huber and squared-hinge losses for mklkit, contributed as a plugin."""

from __future__ import annotations

from .losses import Huber, SquaredHinge

__all__ = ["Huber", "SquaredHinge"]
__version__ = "0.1.0"
