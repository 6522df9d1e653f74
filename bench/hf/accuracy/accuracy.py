"""The "accuracy" metric for Hugging Face's run_classification.py in bench/train_vs_run_classification.py.

run_classification.py calls `evaluate.load("accuracy")`, which would fetch the metric script from
the Hugging Face Hub; the bench runs offline. evaluate looks for a local directory of that name
first: `evaluation_module_factory` in evaluate/loading.py (evaluate 0.4.2) loads `accuracy/accuracy.py`
relative to the working directory when that file exists, before it tries the Hub. The bench runs
the script from bench/hf/, so this module is what it loads.

It was written for the bench, not copied from the Hub, and computes what the Hub's "accuracy"
does (scikit-learn's accuracy_score): the fraction of predictions equal to their reference,
weighted by `sample_weight` when given, or their count with `normalize=False`.
"""
import datasets
import evaluate
import numpy as np


class Accuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="Proportion of predictions equal to their reference (single-label classification).",
            citation="",
            inputs_description="predictions, references: class ids; normalize (default True); sample_weight",
            features=datasets.Features({"predictions": datasets.Value("int32"),
                                        "references": datasets.Value("int32")}),
        )

    def _compute(self, predictions, references, normalize=True, sample_weight=None):
        hits = (np.asarray(predictions) == np.asarray(references)).astype(np.float64)
        weights = np.ones_like(hits) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        total = float(np.sum(hits * weights))
        return {"accuracy": total / float(np.sum(weights)) if normalize else total}
