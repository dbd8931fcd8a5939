"""YAML problem specs: ``yaml.safe_load`` -> typed models -> :class:`Spec` -> :class:`Problem` (``docs/specs.md``).

:func:`load_spec` parses the file, applies ``--set`` overrides and validates the sections (the
pipeline's settings; components are made by the registry, their ``Param``\\ s validate their
parameters); :meth:`Spec.prepare` then loads the data, probes the bank and the engine, and builds the
problem.  Every problem is one :class:`SpecError`, one line naming file, key path, value and what is
allowed.  Relative input paths resolve against the spec's folder, ``output.dir`` against the working
directory.
"""

from __future__ import annotations

from ..pipeline import DEFAULTS, parse_bytes
from ..pipeline.errors import SpecError
from .models import SWEEP_COMPONENTS, SWEEP_KEYS, SWEEP_SECTION, TOP_KEYS, EngineSection, OutputSpec, Spec, load_spec
from .models import parse_spec, sweep_lists, validate_model, validate_spec
from .schema import json_schema
from .yamlio import apply_overrides, parse_override, read_spec_file

SpecError.__module__ = __name__  # its public name: mklkit.spec.SpecError

__all__ = ["SpecError", "Spec", "EngineSection", "OutputSpec", "DEFAULTS", "load_spec", "parse_spec", "validate_spec"]
__all__ += ["parse_override", "parse_bytes", "read_spec_file", "apply_overrides", "json_schema", "sweep_lists"]
__all__ += ["validate_model", "TOP_KEYS", "SWEEP_KEYS", "SWEEP_COMPONENTS", "SWEEP_SECTION"]
