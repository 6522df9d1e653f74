#!/usr/bin/env python3
"""Writes tests/text/goldens/metric_goldens.json: scikit-learn's and SciPy's values of
accuracy, precision, recall and F1 (binary, micro, macro, weighted; single- and multi-label),
Matthews correlation, Pearson, Spearman and the mean squared error on fixed vectors, which
tests/text/metrics_test.cpp compares with tenax::sdk's metrics.

    .venv-goldens/bin/python tools/goldens/metric_goldens.py    (tools/goldens/requirements-text.txt)
"""
import json
import math
import os
import warnings

import numpy as np
import scipy
import sklearn
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import (accuracy_score, f1_score, matthews_corrcoef, mean_squared_error,
                             precision_recall_fscore_support)

OUT = os.path.join("tests", "text", "goldens", "metric_goldens.json")


def num(x):
    x = float(x)
    return None if math.isnan(x) else x


def classification_cases(rng):
    cases = {
        "perfect": ([0, 1, 1, 0, 1], [0, 1, 1, 0, 1]),
        "all_wrong": ([0, 1, 1, 0, 1], [1, 0, 0, 1, 0]),
        "constant_prediction": ([0, 1, 1, 0, 1, 0], [1, 1, 1, 1, 1, 1]),
        "positive_never_true_nor_predicted": ([0, 0, 0], [0, 0, 0]),
        "positive_never_predicted": ([1, 0, 1, 0], [0, 0, 0, 0]),
        "multiclass_missing_class": ([0, 1, 2, 2, 1, 0, 3], [0, 2, 2, 2, 1, 0, 0]),
        "negative_and_sparse_labels": ([-1, 7, 7, -1, 3, 3, 7], [-1, 7, 3, 3, 3, -1, 7]),
    }
    for n, k, accuracy in [(50, 2, 0.7), (1000, 2, 0.85), (200, 3, 0.6), (500, 5, 0.4)]:
        y = rng.integers(0, k, n)
        noise = rng.integers(0, k, n)
        p = np.where(rng.random(n) < accuracy, y, noise)
        cases[f"random_n{n}_k{k}"] = (y.tolist(), p.tolist())
    out = []
    for name, (y, p) in cases.items():
        binary = len(set(y) | set(p)) <= 2 and set(y) | set(p) <= {0, 1}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append({
                "name": name, "y_true": y, "y_pred": p,
                "accuracy": num(accuracy_score(y, p)),
                "f1_binary": num(f1_score(y, p, average="binary", zero_division=0)) if binary else None,
                "f1_macro": num(f1_score(y, p, average="macro", zero_division=0)),
                "matthews_corrcoef": num(matthews_corrcoef(y, p)),
                "precision_recall_f1": averages(y, p, binary),
            })
    return out


def averages(y, p, binary):
    """{average: [precision, recall, f1]} for each average sklearn accepts on these labels."""
    out = {}
    for average in (["binary"] if binary else []) + ["micro", "macro", "weighted"]:
        pr, rc, f1, _ = precision_recall_fscore_support(y, p, average=average, zero_division=0)
        out[average] = [num(pr), num(rc), num(f1)]
    return out


def multilabel_cases(rng):
    cases = {
        "perfect": ([[1, 0, 1], [0, 1, 0]], [[1, 0, 1], [0, 1, 0]]),
        "label_never_true_nor_predicted": ([[1, 0, 0], [0, 1, 0], [1, 1, 0]], [[1, 0, 0], [0, 0, 0], [1, 1, 0]]),
        "empty_rows": ([[0, 0], [1, 0], [0, 1]], [[0, 0], [0, 0], [1, 1]]),
    }
    for n, k in [(40, 3), (300, 5)]:
        y = (rng.random((n, k)) < 0.4).astype(int)
        flip = rng.random((n, k)) < 0.25
        cases[f"random_n{n}_k{k}"] = (y.tolist(), np.where(flip, 1 - y, y).tolist())
    out = []
    for name, (y, p) in cases.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append({"name": name, "y_true": y, "y_pred": p,
                        "accuracy": num(accuracy_score(np.array(y), np.array(p))),
                        "precision_recall_f1": averages(np.array(y), np.array(p), False)})
    return out


def correlation_cases(rng):
    x = rng.normal(size=300)
    cases = {
        "noisy_linear": (x, 2 * x + rng.normal(size=300)),
        "negative": (x, -x ** 3 + 0.1 * rng.normal(size=300)),
        "many_ties": (rng.integers(0, 5, 400).astype(float), rng.integers(0, 5, 400).astype(float)),
        "sts_like_scores": (np.round(rng.uniform(0, 5, 200) * 5) / 5, rng.uniform(0, 5, 200)),
        "large_offset": (1e9 + x, 1e9 + x + 1e-3 * rng.normal(size=300)),
        "two_points": (np.array([1.0, 2.0]), np.array([3.0, 1.0])),
        "constant": (np.ones(10), np.arange(10.0)),
    }
    out = []
    for name, (a, b) in cases.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append({"name": name, "x": a.tolist(), "y": b.tolist(),
                        "pearson": num(pearsonr(a, b)[0]), "spearman": num(spearmanr(a, b)[0]),
                        "mse": num(mean_squared_error(a, b))})
    return out


def main():
    rng = np.random.default_rng(1234)
    data = {"generator": "tools/goldens/metric_goldens.py", "sklearn": sklearn.__version__,
            "scipy": scipy.__version__, "classification": classification_cases(rng),
            "correlation": correlation_cases(rng), "multilabel": multilabel_cases(rng)}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(data, f, indent=None, sort_keys=True)
        f.write("\n")
    print(f"{OUT}: {len(data['classification'])} classification and "
          f"{len(data['correlation'])} correlation cases")


if __name__ == "__main__":
    main()
