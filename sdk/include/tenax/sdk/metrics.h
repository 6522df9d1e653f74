// Evaluation metrics with scikit-learn's and SciPy's definitions (tested against values they
// computed: tools/goldens/metric_goldens.py). No torch.
//
// Classification metrics take label ids (any integers). Degenerate inputs follow the
// references: F1 of a class that is never predicted nor true is 0 (sklearn's zero_division);
// MCC is 0 when either vector is constant; Pearson and Spearman are NaN when either is.
// Empty or mismatched inputs throw tenax::Error.
// Thread-safety: pure functions.
//
//   double acc = tenax::sdk::accuracy(labels, predictions);
//   double f1 = tenax::sdk::f1_binary(labels, predictions);       // positive label 1
#pragma once

#include <cstdint>
#include <vector>

namespace tenax::sdk {

/// Fraction of positions where y_pred equals y_true.
double accuracy(const std::vector<std::int64_t>& y_true, const std::vector<std::int64_t>& y_pred);

/// F1 of the class `pos_label` (sklearn f1_score, average="binary").
double f1_binary(const std::vector<std::int64_t>& y_true, const std::vector<std::int64_t>& y_pred,
                 std::int64_t pos_label = 1);

/// Unweighted mean of per-class F1 over the classes present in y_true or y_pred
/// (sklearn f1_score, average="macro").
double f1_macro(const std::vector<std::int64_t>& y_true, const std::vector<std::int64_t>& y_pred);

/// Matthews correlation coefficient, multiclass (sklearn matthews_corrcoef).
double matthews_corrcoef(const std::vector<std::int64_t>& y_true, const std::vector<std::int64_t>& y_pred);

/// Pearson's r (scipy.stats.pearsonr).
double pearson(const std::vector<double>& x, const std::vector<double>& y);

/// Spearman's rho: Pearson's r of the ranks, ties getting their average rank
/// (scipy.stats.spearmanr).
double spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace tenax::sdk
