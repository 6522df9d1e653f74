// What a text job predicts, from its label column: the problem type as run_classification.py
// infers it, multi-label fields (JSON arrays, separators), regression numbers, the label list in
// a given order, and the errors that name file and line. Plus the collator's float targets.
#include "tenax/sdk/text_targets.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "tenax/core/error.h"
#include "tenax/sdk/text_collator.h"

namespace tenax::sdk {
namespace {

TextRecords records_with(std::vector<std::string> labels) {
  TextRecords r;
  r.path = "data.csv";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    r.texts.push_back("text " + std::to_string(i));
    r.lines.push_back(i + 2);
  }
  r.labels = std::move(labels);
  return r;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(TextTargets, TheProblemTypeIsInferredAsRunClassificationInfersIt) {
  EXPECT_EQ(infer_problem_type(records_with({"pos", "neg"}), ""), ProblemType::kSingleLabelClassification);
  EXPECT_EQ(infer_problem_type(records_with({"0", "1", "2"}), ""), ProblemType::kSingleLabelClassification);
  EXPECT_EQ(infer_problem_type(records_with({"1", "2.5", "-3"}), ""), ProblemType::kRegression);
  EXPECT_EQ(infer_problem_type(records_with({"[\"a\"]", "[]"}), ""), ProblemType::kMultiLabelClassification);
  EXPECT_EQ(infer_problem_type(records_with({"a|b", "a"}), "|"), ProblemType::kMultiLabelClassification);
  EXPECT_EQ(infer_problem_type(records_with({"1.5", "x"}), ""), ProblemType::kSingleLabelClassification);
}

TEST(TextTargets, SingleLabelTargetsAreClassIdsOfTheLabelList) {
  const auto records = records_with({"pos", "neg", "pos"});
  const LabelMap sorted(label_names(records, ProblemType::kSingleLabelClassification, ""));
  EXPECT_TRUE(torch::equal(text_targets(records, ProblemType::kSingleLabelClassification, sorted, ""),
                           torch::tensor({1, 0, 1}, torch::kInt64)));
  const LabelMap given = LabelMap::in_order({"pos", "neg"});  // the config's order, not sorted
  EXPECT_TRUE(torch::equal(text_targets(records, ProblemType::kSingleLabelClassification, given, ""),
                           torch::tensor({0, 1, 0}, torch::kInt64)));
  const std::string why = error_of([&] {
    text_targets(records_with({"pos", "meh"}), ProblemType::kSingleLabelClassification, given, "");
  });
  EXPECT_NE(why.find("data.csv:3"), std::string::npos) << why;
  EXPECT_NE(why.find("'meh'"), std::string::npos) << why;
}

TEST(TextTargets, MultiLabelFieldsBecomeMultiHotRows) {
  const auto arrays = records_with({"[\"b\", \"a\"]", "[]", "[\"c\"]"});
  const auto type = ProblemType::kMultiLabelClassification;
  const LabelMap labels(label_names(arrays, type, ""));
  EXPECT_EQ(labels.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(torch::equal(text_targets(arrays, type, labels, ""),
                           torch::tensor({1.F, 1.F, 0.F, 0.F, 0.F, 0.F, 0.F, 0.F, 1.F}).reshape({3, 3})));
  const auto separated = records_with({"b|a", "", "c"});
  EXPECT_TRUE(torch::equal(text_targets(separated, type, labels, "|"), text_targets(arrays, type, labels, "")));
  EXPECT_EQ(split_multi_label("[1, 2]", ""), (std::vector<std::string>{"1", "2"}));
  EXPECT_NE(error_of([] { split_multi_label("a|b", ""); }).find("data.label_separator"), std::string::npos);
  EXPECT_NE(error_of([] { split_multi_label("a||b", "|"); }).find("empty label"), std::string::npos);
  EXPECT_NE(error_of([] { split_multi_label("[1.5]", ""); }).find("strings or integers"), std::string::npos);
  EXPECT_NE(error_of([] { split_multi_label("[oops", ""); }).find("not a valid JSON array"), std::string::npos);
  const std::string why = error_of([&] { label_names(records_with({"a", "b||c"}), type, "|"); });
  EXPECT_NE(why.find("data.csv:3"), std::string::npos) << why;
}

TEST(TextTargets, RegressionTargetsAreNumbersAndANonNumberNamesItsRow) {
  const auto records = records_with({"1.5", "-2", "3e1"});
  EXPECT_TRUE(label_names(records, ProblemType::kRegression, "").empty());
  EXPECT_TRUE(torch::equal(text_targets(records, ProblemType::kRegression, LabelMap({"-"}), ""),
                           torch::tensor({1.5F, -2.F, 30.F})));
  const std::string why = error_of([] {
    text_targets(records_with({"1.5", "n/a"}), ProblemType::kRegression, LabelMap({"-"}), "");
  });
  EXPECT_NE(why.find("data.csv:3"), std::string::npos) << why;
  EXPECT_NE(why.find("not a number"), std::string::npos) << why;
}

TEST(TextTargets, ALabelListInOrderRefusesDuplicatesAndEmptiness) {
  EXPECT_EQ(LabelMap::in_order({"z", "a"}).id("z"), 0);
  EXPECT_NE(error_of([] { LabelMap::in_order({"a", "b", "a"}); }).find("'a' twice"), std::string::npos);
  EXPECT_THROW(LabelMap::in_order({}), ConfigError);
}

TEST(TextTargets, TheCollatorKeepsFloatTargetsAndTheirShape) {
  const Example a{torch::tensor({101, 7, 102}, torch::kInt64), torch::tensor({1.F, 0.F, 1.F})};
  const Example b{torch::tensor({101, 102}, torch::kInt64), torch::tensor({0.F, 0.F, 1.F})};
  const Batch multi = pad_text_batch({a, b}, 0);
  EXPECT_EQ(multi.labels.scalar_type(), torch::kFloat32);
  EXPECT_EQ(multi.labels.sizes(), (torch::IntArrayRef{2, 3}));
  const Batch regression = pad_text_batch({{a.input, torch::tensor(2.5F)}, {b.input, torch::tensor(-1.F)}}, 0);
  EXPECT_TRUE(torch::equal(regression.labels, torch::tensor({2.5F, -1.F})));
  const Batch classes = pad_text_batch({{a.input, torch::tensor(1, torch::kInt32)}, {b.input, torch::tensor(0)}}, 0);
  EXPECT_EQ(classes.labels.scalar_type(), torch::kInt64);
}

}  // namespace
}  // namespace tenax::sdk
