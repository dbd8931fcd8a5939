"""YAML problem specs: ``yaml.safe_load`` -> typed models -> :class:`Spec` -> :class:`Problem`.

A spec declares one MKL experiment (see ``docs/specs.md`` for every key)::

    data:     {builtin: sonar, test_size: 0.2, seed: 0, standardize: true}
    kernels:  {preset: simplemkl, normalize: trace}
    problem:  {loss: logistic, regularizer: {name: elasticnet, lam: 0.5}, C: 0.5}
    engine:   {name: spicy, tol: 1.0e-4, max_iter: 200}
    output:   {dir: runs/quickstart}

Validation happens in two stages, both before any expensive work:

1. :func:`load_spec` parses the file (``yaml.safe_load`` semantics), applies
   ``--set`` overrides and validates the typed models
   (:mod:`mklkit.spec.models`; the sections are the pipeline's settings);
   components (loss, regularizer, engine) are created through the plugin
   registry so their own :class:`~mklkit.components.params.Param`
   declarations validate their parameters.
2. :meth:`Spec.load_data` / :meth:`Spec.prepare` load the data (labels are
   checked by the loss, NaN/inf by the loaders), check shapes, probe the
   kernel bank on a few rows and ask the engine whether it supports the
   loss x regularizer combination before building the full bank.

Every problem is raised as one :class:`SpecError` whose message is one line,
written by the one formatter of :mod:`mklkit.spec.errors`::

    specs/a.yaml: problem.regularizer.lam: invalid value; got 1.5; allowed: a number in [0, 1]

Relative input paths (``data.train``, ``data.test``,
``kernels.precomputed``, ``kernels.precomputed_factors``) resolve against the folder of the spec file;
``output.dir`` resolves against the current working directory.  ``mklkit
schema`` prints :func:`json_schema`, generated from the models.
"""

from __future__ import annotations

from ..pipeline import DEFAULTS, parse_bytes
from .errors import SpecError, from_pipeline, from_validation, mark_override, one_line
from .models import (
    SWEEP_COMPONENTS,
    SWEEP_KEYS,
    SWEEP_SECTION,
    TOP_KEYS,
    EngineSection,
    OutputSpec,
    Spec,
    load_spec,
    parse_spec,
    refuse_sweep,
    sweep_lists,
    validate_model,
    validate_spec,
)
from .schema import json_schema
from .yamlio import apply_overrides, parse_override, read_spec_file, spec_stem

SpecError.__module__ = __name__  # its public name: mklkit.spec.SpecError

__all__ = [
    "SpecError",
    "Spec",
    "EngineSection",
    "OutputSpec",
    "DEFAULTS",
    "load_spec",
    "parse_spec",
    "validate_spec",
    "parse_override",
    "parse_bytes",
    "read_spec_file",
    "apply_overrides",
    "spec_stem",
    "json_schema",
    "sweep_lists",
    "refuse_sweep",
    "one_line",
    "mark_override",
    "validate_model",
    "from_validation",
    "from_pipeline",
    "TOP_KEYS",
    "SWEEP_KEYS",
    "SWEEP_COMPONENTS",
    "SWEEP_SECTION",
]
