#include "text_metrics.h"

#include <algorithm>
#include <string>

#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::train {
namespace {

bool is_regression_metric(Metric m) { return m == Metric::kPearson || m == Metric::kSpearman || m == Metric::kMse; }

std::vector<double> as_doubles(const torch::Tensor& t) {
  const torch::Tensor flat = t.reshape({-1}).to(torch::kFloat64).contiguous();
  return {flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel()};
}

std::vector<std::vector<std::int64_t>> indicator_rows(const torch::Tensor& t) {
  const torch::Tensor rows = t.to(torch::kInt64).contiguous();
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(rows.size(0)));
  const std::int64_t width = rows.size(1);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::int64_t* row = rows.data_ptr<std::int64_t>() + static_cast<std::int64_t>(i) * width;
    out[i].assign(row, row + width);
  }
  return out;
}

}  // namespace

MetricPlan plan_metrics(const ParsedChoices& choices, std::int64_t pos_label, sdk::ProblemType problem_type,
                        std::int64_t num_labels) {
  MetricPlan plan;
  plan.problem_type = problem_type;
  plan.pos_label = pos_label;
  plan.metrics = choices.metrics;
  const bool regression = problem_type == sdk::ProblemType::kRegression;
  const bool multi_label = problem_type == sdk::ProblemType::kMultiLabelClassification;
  if (plan.metrics.empty()) {
    plan.metrics = {regression ? Metric::kMse : multi_label ? Metric::kF1 : Metric::kAccuracy};
  }
  for (Metric m : plan.metrics) {
    if (is_regression_metric(m) != regression) {
      throw ConfigError(std::string("metrics.metric_name: ") + metric_name(m) + " does not apply to a " +
                        sdk::problem_type_name(problem_type) + " job; " +
                        (regression ? "use pearson, spearman or mse" : "pearson, spearman and mse are for regression"));
    }
    if (m == Metric::kMatthewsCorrelation && multi_label) {
      throw ConfigError("metrics.metric_name: matthews_correlation is for single-label classification");
    }
  }
  plan.average = choices.average.value_or(multi_label       ? sdk::Average::kMicro
                                          : num_labels == 2 ? sdk::Average::kBinary
                                                            : sdk::Average::kMacro);
  if (plan.average == sdk::Average::kBinary && (multi_label || num_labels > 2)) {
    throw ConfigError("metrics.average: binary scores one class of two; this job has " + std::to_string(num_labels) +
                      (multi_label ? " labels per text" : " classes") + ": use micro, macro or weighted");
  }
  if (plan.average == sdk::Average::kBinary && (pos_label < 0 || pos_label >= num_labels)) {
    throw ConfigError("metrics.pos_label: " + std::to_string(pos_label) + " is not a class id (0.." +
                      std::to_string(num_labels - 1) + ")");
  }
  return plan;
}

sdk::ComputeMetrics compute_metrics(const MetricPlan& plan) {
  return [plan](const sdk::PredictionOutput& p) {
    std::map<std::string, double> out;
    if (plan.problem_type == sdk::ProblemType::kRegression) {
      const auto y = as_doubles(p.label_ids), x = as_doubles(p.predictions);
      for (Metric m : plan.metrics) {
        out[metric_name(m)] = m == Metric::kPearson    ? sdk::pearson(x, y)
                              : m == Metric::kSpearman ? sdk::spearman(x, y)
                                                       : sdk::mean_squared_error(y, x);
      }
      return out;
    }
    if (plan.problem_type == sdk::ProblemType::kMultiLabelClassification) {
      const auto y = indicator_rows(p.label_ids), x = indicator_rows(p.predictions.gt(0));
      const sdk::PrecisionRecallF1 s = sdk::multilabel_precision_recall_f1(y, x, plan.average);
      for (Metric m : plan.metrics) {
        out[metric_name(m)] = m == Metric::kAccuracy    ? sdk::multilabel_accuracy(y, x)
                              : m == Metric::kPrecision ? s.precision
                              : m == Metric::kRecall    ? s.recall
                                                        : s.f1;
      }
      return out;
    }
    const auto y = p.label_id_vector(), x = p.argmax_vector();
    const bool needs_scores = std::any_of(plan.metrics.begin(), plan.metrics.end(), [](Metric m) {
      return m == Metric::kF1 || m == Metric::kPrecision || m == Metric::kRecall;
    });
    const sdk::PrecisionRecallF1 s =
        needs_scores ? sdk::precision_recall_f1(y, x, plan.average, plan.pos_label) : sdk::PrecisionRecallF1{};
    for (Metric m : plan.metrics) {
      out[metric_name(m)] = m == Metric::kAccuracy              ? sdk::accuracy(y, x)
                            : m == Metric::kMatthewsCorrelation ? sdk::matthews_corrcoef(y, x)
                            : m == Metric::kPrecision           ? s.precision
                            : m == Metric::kRecall              ? s.recall
                                                                : s.f1;
    }
    return out;
  };
}

}  // namespace tenax::train
