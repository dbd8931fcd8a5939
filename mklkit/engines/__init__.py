"""Engines: the skeleton every engine is built on (:mod:`mklkit.engines.base`), what they can
require (:mod:`~mklkit.engines.capabilities`), the certificate they all compute
(:mod:`~mklkit.engines.objectives`, :mod:`~mklkit.engines.common`) and the built-in engines.
No engine imports the registry or the pipeline: ``auto`` is :mod:`mklkit.pipeline.choose`."""
