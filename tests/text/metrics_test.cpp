// tenax::sdk metrics against scikit-learn and SciPy (tests/text/goldens/metric_goldens.json,
// written by tools/goldens/metric_goldens.py), plus the refusals.
#include "tenax/sdk/metrics.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

nlohmann::json goldens() {
  const std::string path = std::string(TENAX_TEXT_GOLDENS_DIR) + "/metric_goldens.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

void expect_value(double got, const nlohmann::json& expected, double tolerance, const std::string& what) {
  if (expected.is_null()) {
    EXPECT_TRUE(std::isnan(got)) << what << ": reference is NaN, got " << got;
  } else {
    EXPECT_NEAR(got, expected.get<double>(), tolerance) << what;
  }
}

TEST(TextMetrics, ClassificationEqualsScikitLearn) {
  const auto g = goldens();
  ASSERT_GE(g.at("classification").size(), 10u);
  for (const auto& c : g.at("classification")) {
    const auto y = c.at("y_true").get<std::vector<std::int64_t>>();
    const auto p = c.at("y_pred").get<std::vector<std::int64_t>>();
    const std::string name = c.at("name");
    expect_value(accuracy(y, p), c.at("accuracy"), 1e-12, name + " accuracy");
    expect_value(f1_macro(y, p), c.at("f1_macro"), 1e-12, name + " f1_macro");
    expect_value(matthews_corrcoef(y, p), c.at("matthews_corrcoef"), 1e-12, name + " mcc");
    if (!c.at("f1_binary").is_null()) {
      expect_value(f1_binary(y, p), c.at("f1_binary"), 1e-12, name + " f1_binary");
    }
  }
}

// precision_recall_fscore_support for every average sklearn accepts on each case.
void expect_averages(const nlohmann::json& expected, const std::string& name,
                     const std::function<PrecisionRecallF1(Average)>& score) {
  ASSERT_FALSE(expected.empty()) << name;
  for (const auto& [average, values] : expected.items()) {
    const PrecisionRecallF1 got = score(parse_average(average));
    const std::string what = name + " " + average;
    expect_value(got.precision, values.at(0), 1e-12, what + " precision");
    expect_value(got.recall, values.at(1), 1e-12, what + " recall");
    expect_value(got.f1, values.at(2), 1e-12, what + " f1");
  }
}

TEST(TextMetrics, PrecisionRecallAndF1EqualScikitLearnForEveryAverage) {
  const auto g = goldens();
  for (const auto& c : g.at("classification")) {
    const auto y = c.at("y_true").get<std::vector<std::int64_t>>();
    const auto p = c.at("y_pred").get<std::vector<std::int64_t>>();
    expect_averages(c.at("precision_recall_f1"), c.at("name"),
                    [&](Average average) { return precision_recall_f1(y, p, average); });
  }
}

TEST(TextMetrics, MultiLabelScoresEqualScikitLearnOnIndicatorRows) {
  const auto g = goldens();
  ASSERT_GE(g.at("multilabel").size(), 5u);
  for (const auto& c : g.at("multilabel")) {
    const auto y = c.at("y_true").get<std::vector<std::vector<std::int64_t>>>();
    const auto p = c.at("y_pred").get<std::vector<std::vector<std::int64_t>>>();
    const std::string name = c.at("name");
    expect_value(multilabel_accuracy(y, p), c.at("accuracy"), 1e-12, name + " accuracy");
    expect_averages(c.at("precision_recall_f1"), name,
                    [&](Average average) { return multilabel_precision_recall_f1(y, p, average); });
  }
}

TEST(TextMetrics, CorrelationAndMeanSquaredErrorEqualSciPyAndScikitLearn) {
  const auto g = goldens();
  ASSERT_GE(g.at("correlation").size(), 7u);
  for (const auto& c : g.at("correlation")) {
    const auto x = c.at("x").get<std::vector<double>>();
    const auto y = c.at("y").get<std::vector<double>>();
    const std::string name = c.at("name");
    expect_value(pearson(x, y), c.at("pearson"), 1e-9, name + " pearson");
    expect_value(spearman(x, y), c.at("spearman"), 1e-9, name + " spearman");
    // Relative: the errors of some cases are in the tens, summed in a different order than numpy's.
    const double mse_tolerance = 1e-12 * std::max(1.0, std::abs(c.at("mse").get<double>()));
    expect_value(mean_squared_error(x, y), c.at("mse"), mse_tolerance, name + " mse");
  }
}

TEST(TextMetrics, SpearmanGivesTiesTheirAverageRank) {
  // Ranks of x: 1, 2.5, 2.5, 4 -> identical to y's values, so rho = 1; plain ordinal ranks
  // (1, 2, 3, 4) would give less.
  EXPECT_DOUBLE_EQ(spearman({1, 2, 2, 3}, {1, 2.5, 2.5, 4}), 1.0);
}

TEST(TextMetrics, BadInputsThrow) {
  EXPECT_THROW(accuracy({}, {}), Error);
  EXPECT_THROW(accuracy({1, 0}, {1}), Error);
  EXPECT_THROW(f1_binary({0, 1, 2}, {0, 1, 2}), Error);  // three classes
  EXPECT_THROW(f1_binary({0, 2}, {2, 0}), Error);        // pos_label 1 absent
  EXPECT_THROW(precision_recall_f1({0, 1, 2}, {0, 1, 2}, Average::kBinary), Error);
  EXPECT_THROW(multilabel_precision_recall_f1({{1, 0}}, {{1, 0}}, Average::kBinary), Error);
  EXPECT_THROW(multilabel_accuracy({{1, 0}, {1}}, {{1, 0}, {1, 0}}), Error);  // ragged rows
  EXPECT_THROW(mean_squared_error({}, {}), Error);
  EXPECT_THROW(mean_squared_error({1.0, 2.0}, {1.0}), Error);
  EXPECT_THROW(mean_squared_error({1.0}, {std::nan("")}), Error);
  EXPECT_THROW(parse_average("samples"), ConfigError);
  EXPECT_THROW(pearson({1.0}, {2.0}), Error);
  EXPECT_THROW(spearman({1.0, NAN}, {2.0, 3.0}), Error);
}

}  // namespace
}  // namespace tenax::sdk
