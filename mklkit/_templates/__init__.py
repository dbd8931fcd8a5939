"""File templates (:class:`string.Template` sources) for :func:`mklkit.scaffold.new_plugin`: ``$name`` (component and
entry-point name), ``$package``, ``$dist``, ``$cls``, ``$kind``, ``$module`` and ``$mklkit_version``."""
from __future__ import annotations

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=68", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "$dist"
version = "0.1.0"
description = "The $name $kind for mklkit"
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["mklkit>=$mklkit_version", "numpy", "numba"]

[project.optional-dependencies]
test = ["pytest>=7"]

# mklkit finds the plugin through this entry point: the module named here
# holds the @hookimpl functions.
[project.entry-points.mklkit]
$name = "$package.plugin"

[tool.setuptools.packages.find]
include = ["$package*"]

[tool.pytest.ini_options]
testpaths = ["tests"]
'''

README = '''\
# $dist

The `$name` $kind for mklkit.

    pip install -e .                 # register the plugin
    mklkit plugins                   # lists $kind '$name' from $dist 0.1.0
    python -m pytest                 # runs the conformance kit on it
    mklkit check-plugin $name        # the same, from the command line

Edit `$package/$module.py`: every place to change is marked TODO (mklkit's `docs/plugins.md`).
'''

INIT = '''\
"""The $name $kind for mklkit."""
from __future__ import annotations

from .$module import $cls

__all__ = ["$cls"]
'''

PLUGIN = '''\
"""Entry point of $dist (group ``mklkit``)."""
from __future__ import annotations

from mklkit.plugins import hookimpl


@hookimpl
def mklkit_register_components(register):
    """Contribute the components of this distribution."""
    from .$module import $cls

    register($cls)
'''

LOSS = '''\
r"""The $name loss: a working scaled squared loss :math:`\\ell(y, z) = \\tfrac{s}{2}(z - y)^2`, conjugate
:math:`\\ell^*(y, u) = uy + u^2/(2s)`.  Replace the formulas (every TODO), keep the signatures: each kernel takes
C-contiguous float64 arrays and ``params`` (numeric parameters in declaration order) and returns a new array.
"""
from __future__ import annotations

import numpy as np

from mklkit.components.base import REGRESSION, Loss, Param, kernel


class $cls(Loss):
    r"""TODO: one paragraph with the formula of the loss and of its conjugate.

    Parameters
    ----------
    scale : float, default 1.0
        Curvature of the loss; > 0.
    """

    name = "$name"
    description = "TODO: one line shown by `mklkit plugins`"
    task = REGRESSION  # TODO: or CLASSIFICATION (labels in {-1, +1})
    params = (Param("scale", 1.0, "curvature of the loss", low=0.0, low_open=True),)
    # TODO: if the conjugate's gradient stays finite at an end of its domain (or it has a kink), set
    # smooth_conjugate = False and write the kernels l0, l0_grad, l0_hess, cons, cons_grad, cons_hess of its
    # constrained form, with n_aux and n_cons; see mklkit-huber.
    smooth_conjugate = True
    smooth_primal = True

    # TODO: the loss value ell(y_i, z_i); params[0] is `scale`.
    @kernel
    def value(y, z, params):
        return 0.5 * params[0] * (z - y) ** 2

    # TODO: d ell / dz (a subgradient at kinks).
    @kernel
    def deriv(y, z, params):
        return params[0] * (z - y)

    # TODO: d^2 ell / dz^2 (0 where undefined; 0 everywhere when omitted).
    @kernel
    def deriv2(y, z, params):
        return np.full(y.shape[0], params[0])

    # TODO: the conjugate sup_z (u z - ell(y, z)); np.inf outside its domain.
    @kernel
    def conj(y, u, params):
        return u * y + 0.5 * u * u / params[0]

    # TODO: d ell* / du on the domain.
    @kernel
    def conj_grad(y, u, params):
        return y + u / params[0]

    # TODO: d^2 ell* / du^2 on the domain (0 everywhere when omitted).
    @kernel
    def conj_hess(y, u, params):
        return np.full(y.shape[0], 1.0 / params[0])

    # TODO: ends of the domain of ell*(y_i, .); -inf / +inf when unbounded.
    @kernel
    def conj_lower(y, params):
        return np.full(y.shape[0], -np.inf)

    @kernel
    def conj_upper(y, params):
        return np.full(y.shape[0], np.inf)

    def deriv_lipschitz(self) -> float:
        """TODO: a bound on |d^2 ell / dz^2| (float("inf") if none)."""
        return float(self.scale)

    def cvxpy_expr(self, y, z, w=None):
        """TODO: sum_i w_i ell(y_i, z_i) as a cvxpy expression of z (w None: all 1), for mklkit's conic reference."""
        import cvxpy as cp

        terms = 0.5 * self.scale * cp.square(z - y)
        return cp.sum(terms) if w is None else cp.sum(cp.multiply(w, terms))
'''

REGULARIZER = '''\
r"""The $name regularizer: a working block 1-norm :math:`\\tilde g_C(x) = C x` (:math:`g(t) = \\sqrt t`): prox
:math:`(v - C)_+`, conjugate the indicator of :math:`[0, C]`, envelope :math:`(y - C)_+^2/2`, kernel weight
:math:`d = x`, :math:`h(d) = d`.  Replace the formulas (every TODO), keep the signatures: ``x``, ``v``, ``y``, ``d``
are C-contiguous float64 arrays of numbers >= 0, ``C > 0``, ``params`` the parameter vector; each returns a new array.
"""
from __future__ import annotations

import numpy as np

from mklkit.components.base import Regularizer, kernel


class $cls(Regularizer):
    r"""TODO: one paragraph with g, the prox and the conjugate."""

    name = "$name"
    description = "TODO: one line shown by `mklkit plugins`"
    params = ()  # TODO: declare parameters with mklkit.components.base.Param

    # TODO: the value C g(x^2).
    @kernel
    def value(x, C, params):
        return C * x

    # TODO: argmin_{x >= 0} C g(x^2) + (x - v)^2 / 2.
    @kernel
    def prox(v, C, params):
        return np.maximum(v - C, 0.0)

    # TODO: d prox / dv.
    @kernel
    def prox_deriv(v, C, params):
        return (v > C).astype(np.float64)

    # TODO: the conjugate sup_{x >= 0} x y - C g(x^2) (np.inf outside its domain), and its first and second
    # derivatives where smooth (here 0 on the domain, inf outside).
    @kernel
    def conj(y, C, params):
        return np.where(y <= C, 0.0, np.inf)

    conj_grad = conj_hess = conj

    # TODO: Moreau envelope of the conjugate, min_{y' >= 0} conj(y') + (y' - y)^2 / 2 (derivatives: prox, prox_deriv).
    @kernel
    def env(y, C, params):
        r = np.maximum(y - C, 0.0)
        return 0.5 * r * r

    # TODO: kernel weight d = 1 / (2 g'(x^2)).
    @kernel
    def weight(x, params):
        return x.copy()

    # TODO: h(d) = -2 g*(1 / (2 d)) of the Tikhonov form; np.inf outside its domain.
    @kernel
    def penalty(d, params):
        return np.where(d >= 0.0, d, np.inf)

    def conj_radius(self, C: float) -> float:
        """TODO: radius of the domain of the conjugate (float("inf") if unbounded)."""
        return float(C)

    def cvxpy_expr(self, norms, squares, C, betas=None):
        """TODO: sum_m C g(x_m^2) as a cvxpy expression of the block norms ``norms`` (``squares``: their squares;
        ``betas``: the block variables), for mklkit's conic reference."""
        import cvxpy as cp

        return C * cp.sum(cp.hstack(norms))
'''

TEST = '''\
"""Conformance of the $name $kind (the public kit of mklkit)."""
from __future__ import annotations

from mklkit.plugins import Registry
from mklkit.testing import assert_conforms, check_parameter_points

from $package import $cls, plugin


def test_conforms_to_the_contract():
    assert_conforms($cls())


def test_conforms_at_random_parameter_points():
    # the defaults and five points drawn from the declared parameters
    for report in check_parameter_points($cls, n_random=5, seed=0):
        assert report.ok, str(report)


def test_registers_through_the_plugin_hook():
    reg = Registry()
    reg.register_plugin(plugin, "$dist")
    assert reg.get("$kind", "$name") is $cls
'''
