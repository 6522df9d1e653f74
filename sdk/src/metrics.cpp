#include "tenax/sdk/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <string>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

template <typename A, typename B>
void check_sizes(const std::vector<A>& a, const std::vector<B>& b, const char* metric) {
  if (a.empty()) throw Error(std::string(metric) + ": no values");
  if (a.size() != b.size()) {
    throw Error(std::string(metric) + ": " + std::to_string(a.size()) + " true values but " + std::to_string(b.size()) +
                " predictions");
  }
}

struct Counts {
  double tp = 0, fp = 0, fn = 0;
};

double f1_of(const Counts& c) {
  // 2tp / (2tp + fp + fn): sklearn's value, 0 when the class is nowhere (zero_division=0).
  const double denominator = 2 * c.tp + c.fp + c.fn;
  return denominator == 0 ? 0.0 : 2 * c.tp / denominator;
}

double ratio(double a, double b) { return b == 0 ? 0.0 : a / b; }

PrecisionRecallF1 scores_of(const Counts& c) { return {ratio(c.tp, c.tp + c.fp), ratio(c.tp, c.tp + c.fn), f1_of(c)}; }

// sklearn's averages over per-label counts: micro pools the counts; macro and weighted average
// the per-label scores (weighted by each label's true count, tp + fn).
PrecisionRecallF1 averaged(const std::vector<Counts>& labels, Average average) {
  if (average == Average::kMicro) {
    Counts pooled;
    for (const Counts& c : labels) pooled.tp += c.tp, pooled.fp += c.fp, pooled.fn += c.fn;
    return scores_of(pooled);
  }
  PrecisionRecallF1 sum;
  double total_weight = 0;
  for (const Counts& c : labels) {
    const double weight = average == Average::kWeighted ? c.tp + c.fn : 1.0;
    const PrecisionRecallF1 s = scores_of(c);
    sum.precision += weight * s.precision, sum.recall += weight * s.recall, sum.f1 += weight * s.f1;
    total_weight += weight;
  }
  if (total_weight == 0) return {};
  return {sum.precision / total_weight, sum.recall / total_weight, sum.f1 / total_weight};
}

std::size_t indicator_width(const std::vector<std::vector<std::int64_t>>& y_true,
                            const std::vector<std::vector<std::int64_t>>& y_pred, const char* metric) {
  const std::size_t width = y_true.front().size();
  for (std::size_t i = 0; i < y_true.size(); ++i) {
    if (y_true[i].size() != width || y_pred[i].size() != width) {
      throw Error(std::string(metric) + ": row " + std::to_string(i) + " is not " + std::to_string(width) +
                  " labels wide");
    }
  }
  if (width == 0) throw Error(std::string(metric) + ": rows with no labels");
  return width;
}

std::map<std::int64_t, Counts> per_class(const std::vector<std::int64_t>& y_true,
                                         const std::vector<std::int64_t>& y_pred) {
  std::map<std::int64_t, Counts> counts;
  for (std::size_t i = 0; i < y_true.size(); ++i) {
    if (y_true[i] == y_pred[i]) {
      counts[y_true[i]].tp += 1;
    } else {
      counts[y_pred[i]].fp += 1;
      counts[y_true[i]].fn += 1;
    }
  }
  return counts;
}

// Two-pass, in long double: the goldens are SciPy's float64 results, and a one-pass formula
// loses digits on data with a large mean.
double pearson_of(const std::vector<double>& x, const std::vector<double>& y) {
  const auto n = static_cast<long double>(x.size());
  long double mx = 0, my = 0;
  for (std::size_t i = 0; i < x.size(); ++i) mx += x[i], my += y[i];
  mx /= n, my /= n;
  long double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const long double dx = x[i] - mx, dy = y[i] - my;
    sxy += dx * dy, sxx += dx * dx, syy += dy * dy;
  }
  if (sxx == 0 || syy == 0) return std::numeric_limits<double>::quiet_NaN();
  const long double r = sxy / std::sqrt(sxx * syy);
  return static_cast<double>(std::clamp(r, -1.0L, 1.0L));
}

// 1-based ranks; tied values share the mean of the ranks they span.
std::vector<double> average_ranks(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i + 1;
    while (j < order.size() && v[order[j]] == v[order[i]]) ++j;
    const double rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (std::size_t k = i; k < j; ++k) ranks[order[k]] = rank;
    i = j;
  }
  return ranks;
}

void check_finite(const std::vector<double>& v, const char* metric) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      throw Error(std::string(metric) + ": value " + std::to_string(i) + " is not finite");
    }
  }
}

}  // namespace

double accuracy(const std::vector<std::int64_t>& y_true, const std::vector<std::int64_t>& y_pred) {
  check_sizes(y_true, y_pred, "accuracy");
  std::size_t right = 0;
  for (std::size_t i = 0; i < y_true.size(); ++i) right += y_true[i] == y_pred[i];
  return static_cast<double>(right) / static_cast<double>(y_true.size());
}

double f1_binary(const std::vector<std::int64_t>& y_true, const std::vector<std::int64_t>& y_pred,
                 std::int64_t pos_label) {
  check_sizes(y_true, y_pred, "f1_binary");
  const auto counts = per_class(y_true, y_pred);
  if (counts.size() > 2) {
    throw Error("f1_binary: " + std::to_string(counts.size()) +
                " distinct labels; use f1_macro for more than two classes");
  }
  auto it = counts.find(pos_label);
  if (it == counts.end() && counts.size() == 2) {  // sklearn refuses this too
    throw Error("f1_binary: pos_label " + std::to_string(pos_label) +
                " is neither of the two labels present; pass the positive class's id");
  }
  return it == counts.end() ? 0.0 : f1_of(it->second);
}

double f1_macro(const std::vector<std::int64_t>& y_true, const std::vector<std::int64_t>& y_pred) {
  check_sizes(y_true, y_pred, "f1_macro");
  const auto counts = per_class(y_true, y_pred);
  double sum = 0;
  for (const auto& [label, c] : counts) sum += f1_of(c);
  return sum / static_cast<double>(counts.size());
}

Average parse_average(const std::string& name) {
  if (name == "binary") return Average::kBinary;
  if (name == "micro") return Average::kMicro;
  if (name == "macro") return Average::kMacro;
  if (name == "weighted") return Average::kWeighted;
  throw ConfigError("average '" + name + "' is not one of binary, micro, macro, weighted");
}

const char* average_name(Average average) {
  switch (average) {
    case Average::kBinary: return "binary";
    case Average::kMicro: return "micro";
    case Average::kMacro: return "macro";
    case Average::kWeighted: return "weighted";
  }
  return "?";
}

PrecisionRecallF1 precision_recall_f1(const std::vector<std::int64_t>& y_true, const std::vector<std::int64_t>& y_pred,
                                      Average average, std::int64_t pos_label) {
  check_sizes(y_true, y_pred, "precision_recall_f1");
  const auto counts = per_class(y_true, y_pred);
  if (average == Average::kBinary) {
    if (counts.size() > 2) {
      throw Error("precision_recall_f1: " + std::to_string(counts.size()) +
                  " distinct labels with average binary; use micro, macro or weighted for more than two classes");
    }
    const auto it = counts.find(pos_label);
    if (it == counts.end() && counts.size() == 2) {
      throw Error("precision_recall_f1: pos_label " + std::to_string(pos_label) +
                  " is neither of the two labels present; pass the positive class's id");
    }
    return it == counts.end() ? PrecisionRecallF1{} : scores_of(it->second);
  }
  std::vector<Counts> classes;
  for (const auto& [label, c] : counts) classes.push_back(c);
  return averaged(classes, average);
}

PrecisionRecallF1 multilabel_precision_recall_f1(const std::vector<std::vector<std::int64_t>>& y_true,
                                                 const std::vector<std::vector<std::int64_t>>& y_pred,
                                                 Average average) {
  check_sizes(y_true, y_pred, "multilabel_precision_recall_f1");
  if (average == Average::kBinary) {
    throw Error(
        "multilabel_precision_recall_f1: average binary has no meaning for several labels; use micro, macro "
        "or weighted");
  }
  const std::size_t width = indicator_width(y_true, y_pred, "multilabel_precision_recall_f1");
  std::vector<Counts> labels(width);
  for (std::size_t i = 0; i < y_true.size(); ++i) {
    for (std::size_t k = 0; k < width; ++k) {
      const bool t = y_true[i][k] != 0, p = y_pred[i][k] != 0;
      labels[k].tp += t && p;
      labels[k].fp += !t && p;
      labels[k].fn += t && !p;
    }
  }
  return averaged(labels, average);
}

double multilabel_accuracy(const std::vector<std::vector<std::int64_t>>& y_true,
                           const std::vector<std::vector<std::int64_t>>& y_pred) {
  check_sizes(y_true, y_pred, "multilabel_accuracy");
  indicator_width(y_true, y_pred, "multilabel_accuracy");
  std::size_t right = 0;
  for (std::size_t i = 0; i < y_true.size(); ++i) right += y_true[i] == y_pred[i];
  return static_cast<double>(right) / static_cast<double>(y_true.size());
}

double matthews_corrcoef(const std::vector<std::int64_t>& y_true, const std::vector<std::int64_t>& y_pred) {
  check_sizes(y_true, y_pred, "matthews_corrcoef");
  // sklearn's multiclass form: (c*s - sum_k p_k t_k) / sqrt((s^2 - sum p_k^2)(s^2 - sum t_k^2)).
  std::map<std::int64_t, long double> t, p;
  long double correct = 0;
  for (std::size_t i = 0; i < y_true.size(); ++i) {
    t[y_true[i]] += 1, p[y_pred[i]] += 1;
    correct += y_true[i] == y_pred[i];
  }
  const auto s = static_cast<long double>(y_true.size());
  long double pt = 0, pp = 0, tt = 0;
  for (const auto& [k, n] : t) {
    tt += n * n;
    auto it = p.find(k);
    if (it != p.end()) pt += it->second * n;
  }
  for (const auto& [k, n] : p) pp += n * n;
  const long double cov_ytyp = correct * s - pt;
  const long double cov_ypyp = s * s - pp, cov_ytyt = s * s - tt;
  if (cov_ypyp * cov_ytyt == 0) return 0.0;
  return static_cast<double>(cov_ytyp / std::sqrt(cov_ytyt * cov_ypyp));
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  check_sizes(x, y, "pearson");
  check_finite(x, "pearson");
  check_finite(y, "pearson");
  if (x.size() < 2) throw Error("pearson: needs at least 2 values");
  return pearson_of(x, y);
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  check_sizes(x, y, "spearman");
  check_finite(x, "spearman");
  check_finite(y, "spearman");
  if (x.size() < 2) throw Error("spearman: needs at least 2 values");
  return pearson_of(average_ranks(x), average_ranks(y));
}

double mean_squared_error(const std::vector<double>& y_true, const std::vector<double>& y_pred) {
  check_sizes(y_true, y_pred, "mean_squared_error");
  check_finite(y_true, "mean_squared_error");
  check_finite(y_pred, "mean_squared_error");
  if (y_true.empty()) throw Error("mean_squared_error: needs at least 1 value");
  double sum = 0;
  for (std::size_t i = 0; i < y_true.size(); ++i) sum += (y_true[i] - y_pred[i]) * (y_true[i] - y_pred[i]);
  return sum / static_cast<double>(y_true.size());
}

}  // namespace tenax::sdk
