// The compute_metrics of a `tenax train` text job: the metrics the job names, computed on the
// gathered predictions as Hugging Face's run_classification.py does — argmax for single-label
// classification, logit > 0 (sigmoid > 0.5) per label for multi-label, the raw output for
// regression — with scikit-learn's / SciPy's definitions (tenax/sdk/metrics.h).
// Thread-safety: the returned function is pure.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "job_options.h"
#include "tenax/sdk/metrics.h"
#include "tenax/sdk/models/pretrained_config.h"
#include "tenax/sdk/prediction.h"

namespace tenax::train {

struct MetricPlan {
  sdk::ProblemType problem_type = sdk::ProblemType::kSingleLabelClassification;
  std::vector<Metric> metrics;
  sdk::Average average = sdk::Average::kBinary;
  std::int64_t pos_label = 1;
};

/// The job's metrics for `problem_type` with `num_labels` classes: the defaults filled in
/// (accuracy; f1 for multi-label; mse for regression; average binary for two classes, macro for
/// more, micro for multi-label), a metric or average that does not fit the task refused with a
/// ConfigError naming the key (pearson for a classifier, binary for three classes).
MetricPlan plan_metrics(const ParsedChoices& choices, std::int64_t pos_label, sdk::ProblemType problem_type,
                        std::int64_t num_labels);

sdk::ComputeMetrics compute_metrics(const MetricPlan& plan);

}  // namespace tenax::train
