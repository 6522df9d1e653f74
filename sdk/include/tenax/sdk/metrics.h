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
#include <string>
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

/// sklearn's `average` for precision, recall and F1: kBinary scores the class pos_label only
/// (at most two labels present); kMicro pools every class's counts; kMacro is the unweighted mean
/// of the per-class scores, kWeighted their mean weighted by each class's true count.
enum class Average { kBinary, kMicro, kMacro, kWeighted };

/// "binary", "micro", "macro", "weighted" (sklearn's spellings); throws ConfigError otherwise.
Average parse_average(const std::string& name);
const char* average_name(Average average);

struct PrecisionRecallF1 {
  double precision = 0;
  double recall = 0;
  double f1 = 0;
};

/// sklearn precision_recall_fscore_support(y_true, y_pred, average=..., pos_label=...,
/// zero_division=0) over the labels present in either vector.
PrecisionRecallF1 precision_recall_f1(const std::vector<std::int64_t>& y_true, const std::vector<std::int64_t>& y_pred,
                                      Average average, std::int64_t pos_label = 1);

/// The same on multi-label indicator rows (row i: sample i, one 0/1 per label; every row the
/// same width), as sklearn scores an indicator matrix: each label a binary problem. kBinary is
/// refused (sklearn refuses it too).
PrecisionRecallF1 multilabel_precision_recall_f1(const std::vector<std::vector<std::int64_t>>& y_true,
                                                 const std::vector<std::vector<std::int64_t>>& y_pred, Average average);

/// The fraction of rows predicted exactly (sklearn accuracy_score on indicator rows).
double multilabel_accuracy(const std::vector<std::vector<std::int64_t>>& y_true,
                           const std::vector<std::vector<std::int64_t>>& y_pred);

/// Matthews correlation coefficient, multiclass (sklearn matthews_corrcoef).
double matthews_corrcoef(const std::vector<std::int64_t>& y_true, const std::vector<std::int64_t>& y_pred);

/// Pearson's r (scipy.stats.pearsonr).
double pearson(const std::vector<double>& x, const std::vector<double>& y);

/// Spearman's rho: Pearson's r of the ranks, ties getting their average rank
/// (scipy.stats.spearmanr).
double spearman(const std::vector<double>& x, const std::vector<double>& y);

/// Mean squared error, the mean of (y_true - y_pred)^2 (sklearn mean_squared_error): the
/// regression metric `mse`, and the regression head's loss.
double mean_squared_error(const std::vector<double>& y_true, const std::vector<double>& y_pred);

}  // namespace tenax::sdk
