"""The labels of the data: the classes of a classification target and their encoding, the checks with
the loss, the weights of the training rows (``data.sample_weight``, ``data.class_weight``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..plugins import get_registry
from .data import Data, label_text, plain
from .errors import PipelineError, one_line
from .settings import DataSettings

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


class Classes:
    """The class labels of a classification target (sorted, as the estimators' encoder: the positive class of
    two is the greater by default) and their encoding."""

    def __init__(self, loss: Any, data: DataSettings, y: Any, key: str = "problem.loss"):
        import numpy as np

        from .._multiclass import encode_classes

        y = np.asarray(y)
        if y.ndim != 1 or y.size == 0 or (y.dtype.kind in "fc" and not np.all(np.isfinite(y))):
            _labels(loss, y, key)  # the loss's own message (shape, empty, not finite)
        if y.dtype.kind == "f":
            from sklearn.utils.multiclass import type_of_target

            if type_of_target(y) == "continuous":
                raise _continuous(loss, y, key)
        self.classes, _ = encode_classes(y)
        if self.classes.size < 2:
            raise PipelineError(
                key,
                f"labels do not fit the loss: the classification loss {loss.name!r} needs "
                f"at least 2 classes; got only the label {label_text(self.classes[0])}",
                loss.name,
                "a target with two or more classes, or a regression loss",
            )
        self.positive: int | None = None
        if data.positive is not None:
            shown = ", ".join(label_text(c) for c in self.classes[:10]) + (", ..." if self.classes.size > 10 else "")
            if self.classes.size > 2:
                raise PipelineError(
                    "data.positive",
                    f"only for two classes; the target has {self.classes.size} ({shown}), solved one-vs-rest",
                    data.positive,
                    "no data.positive with more than two classes",
                )
            self.positive = self.index(data.positive)
            if self.positive is None:
                raise PipelineError(
                    "data.positive",
                    "is not one of the labels of the target",
                    data.positive,
                    f"one of the labels present: {shown}",
                )
        elif self.classes.size == 2:
            self.positive = 1  # the greater label, as scikit-learn

    @property
    def among(self) -> str:
        """``labels among ...`` (the first ten), what a label must be."""
        return "labels among " + ", ".join(label_text(c) for c in self.classes[:10])

    def index(self, value: Any) -> int | None:
        for k, c in enumerate(self.classes):
            c = plain(c)
            if (not isinstance(value, str) and not isinstance(c, str) and float(value) == float(c)) or str(value) == (
                c if isinstance(c, str) else f"{c:g}"
            ):
                return k
        return None

    def encode(self, y: Any, key: str, shown: Any = PipelineError.NO_VALUE) -> np.ndarray:
        """The engines' labels of the data's labels: +1/-1 for two classes (positive: ``classes[positive]``),
        else the class indices (float64); a label the training data do not have is an error at ``key``."""
        import numpy as np

        y = np.asarray(y)
        if (y.dtype.kind in "US") != (self.classes.dtype.kind in "US"):
            raise PipelineError(
                key,
                f"its labels are {'strings' if y.dtype.kind in 'US' else 'numbers'}, unlike those of the training data",
                shown=shown,
                allowed=self.among,
            )
        idx = np.clip(np.searchsorted(self.classes, y), 0, self.classes.size - 1)
        bad = self.classes[idx] != y
        if np.any(bad):
            v = y[np.flatnonzero(bad)[0]]
            raise PipelineError(
                key,
                f"has the label {label_text(v)}, which the training data do not have",
                shown=shown,
                allowed=self.among,
            )
        if self.positive is None:
            return idx.astype(np.float64)
        return np.where(idx == self.positive, 1.0, -1.0)

    def codes(self, y: np.ndarray) -> np.ndarray:
        """Class indices of engine labels."""
        import numpy as np

        if self.positive is None:
            return np.asarray(y, dtype=np.intp)
        return np.where(np.asarray(y) > 0, self.positive, 1 - self.positive)

    def check_split(self, y: np.ndarray, key: str, value: Any) -> None:
        """A stratified split needs two rows of every class."""
        import numpy as np

        counts = np.bincount(self.codes(y), minlength=self.classes.size)
        if counts.min() < 2:
            k = int(np.argmin(counts))
            raise PipelineError(
                key,
                f"cannot split: the class {label_text(self.classes[k])} has {counts[k]} row; "
                "a stratified split needs at least 2 of every class",
                value,
                "data.test_size: 0, or more rows of every class",
            )

    def check_train(self, y: np.ndarray, key: str, value: Any) -> None:
        """Every class in the training rows (a small subsample may lose one)."""
        import numpy as np

        present = np.unique(self.codes(y))
        if present.size < self.classes.size:
            missing = next(k for k in range(self.classes.size) if k not in present)
            raise PipelineError(
                key,
                f"the training part has no row of the class {label_text(self.classes[missing])}",
                value,
                "a larger training part (every class needs training rows)",
            )


def _continuous(loss: Any, y: np.ndarray, key: str) -> PipelineError:
    """A classification loss on a target of non-integer numbers: name the regression losses."""
    import numpy as np

    n = int(np.unique(y).size)
    others = [r.name for r in get_registry().registrations("loss") if getattr(r.cls, "task", None) == "regression"]
    return PipelineError(
        key,
        f"labels do not fit the loss: the target looks continuous ({n} distinct values, not "
        f"all integers), and {loss.name!r} is a classification loss; a continuous target needs a "
        "regression loss",
        loss.name,
        f"a regression loss ({', '.join(sorted(others)) or 'none installed'}) for this target, "
        "or a target of class labels (integers or strings)",
    )


def _labels(loss: Any, y: Any, key: str = "problem.loss") -> np.ndarray:
    """Check labels with the loss; a LabelError becomes a PipelineError at ``problem.loss``."""
    from ..components.base import LabelError

    try:
        return loss.validate_labels(y)
    except LabelError as exc:
        others = [r.name for r in get_registry().registrations("loss") if getattr(r.cls, "task", None) != loss.task]
        other_task = "regression" if loss.task == "classification" else "classification"
        allowed = (
            f"a {other_task} loss ({', '.join(others) or 'none installed'}) for this target, "
            f"or a target that fits {loss.name!r}"
        )
        what, got = getattr(exc, "problem", None), getattr(exc, "got", None)
        if what is None:
            what, sep, got = one_line(str(exc)).partition("; got ")
            got = got if sep else None
        if got:
            raise PipelineError(key, f"labels do not fit the loss: {what}", allowed=allowed, shown=got) from None
        raise PipelineError(key, f"labels do not fit the loss: {what}", loss.name, allowed) from None


def encode_labels(loss: Any, data: DataSettings, y: Any) -> tuple[Classes | None, np.ndarray]:
    """The training labels: class indices with their :class:`Classes` (classification), or checked numbers."""
    if loss.task == "classification":
        enc = Classes(loss, data, y)
        return enc, enc.encode(y, "problem.loss")
    if data.positive is not None:
        raise PipelineError(
            "data.positive",
            "only used with a classification loss",
            data.positive,
            f"no data.positive with the regression loss {loss.name!r}",
        )
    return None, _labels(loss, y)


def encode_test_labels(
    enc: Classes | None, loss: Any, y: Any, key: str, shown: Any = PipelineError.NO_VALUE
) -> np.ndarray:
    """Test labels like the training labels (a label the training data lack is an error at ``key``)."""
    return _labels(loss, y) if enc is None else enc.encode(y, key, shown)


def weigh(d: Data, data: DataSettings, enc: Classes | None, sw: np.ndarray | None) -> Data:
    """``d`` with the classes of ``enc`` (its ``y_*`` are already the engines' labels) and ``d.w_train``: the
    ``data.sample_weight`` column ``sw`` times each row's ``data.class_weight`` (rows of weight 0 leave the
    training part; all 1: ``None``)."""
    import numpy as np

    if enc is not None:
        d.classes, d.positive = enc.classes, enc.positive
    w = sw
    if sw is not None:
        bad = ~np.isfinite(sw) | (sw < 0.0)
        if np.any(bad):
            name = data.sample_weight
            raise PipelineError(
                "data.sample_weight",
                f"column {name!r} has the weight {sw[np.flatnonzero(bad)[0]]:g} in a training row",
                name,
                "finite numbers >= 0 (0 leaves the row out)",
            )
    cw = data.class_weight
    if cw is not None:
        if enc is None:
            raise PipelineError(
                "data.class_weight",
                "only used with a classification loss",
                cw,
                "no data.class_weight with a regression loss",
            )
        k = enc.classes.size
        codes = enc.codes(d.y_train)
        if cw == "balanced":  # the estimators' rule (scikit-learn's), on the training part
            from sklearn.utils.class_weight import compute_class_weight

            weights = compute_class_weight("balanced", classes=np.arange(k), y=codes)
        else:
            weights = np.ones(k)
            for label, v in cw.items():
                i = enc.index(label)
                if i is None:
                    raise PipelineError(
                        "data.class_weight",
                        f"{label_text(label)} is not one of the labels of the target",
                        cw,
                        enc.among,
                    )
                weights[i] = float(v)
        d.class_weights = weights
        w = weights[codes] if w is None else w * weights[codes]
    if w is None:
        return d
    # a zero weight comes from the class weights when they are given (else from the column)
    key, value = ("data.class_weight", cw) if cw is not None else ("data.sample_weight", data.sample_weight)
    if not np.any(w > 0.0):
        raise PipelineError(key, "every training row has weight 0", value, "weights > 0 for some rows")
    if np.any(w == 0.0):
        if d.precomputed:
            raise PipelineError(
                key,
                "gives some training rows weight 0, which precomputed kernels cannot leave out",
                value,
                "weights > 0",
            )
        keep = np.flatnonzero(w > 0.0)
        d.X_train, d.y_train, w = d.X_train[keep], np.ascontiguousarray(d.y_train[keep]), w[keep]
        if enc is not None:
            enc.check_train(d.y_train, key, value)
    d.w_train = None if np.all(w == 1.0) else np.ascontiguousarray(w, dtype=np.float64)
    return d
