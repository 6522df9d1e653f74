// transformers' LabelSmoother against its goldens (tests/sdk/goldens/label_smoothing_goldens.json,
// written by tools/goldens/label_smoothing_goldens.py): the loss and its gradient for sequence
// and token classification, with ignored labels; and the refusal of float labels.
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "label_smoothing.h"
#include "tenax/core/error.h"

namespace tenax::sdk::detail {
namespace {

nlohmann::json goldens() {
  const std::string path = std::string(TENAX_SDK_GOLDENS_DIR) + "/label_smoothing_goldens.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + " is missing (tools/goldens/label_smoothing_goldens.py)");
  return nlohmann::json::parse(in);
}

torch::Tensor tensor_of(const nlohmann::json& values, const std::vector<std::int64_t>& shape, torch::Dtype dtype) {
  return torch::tensor(values.get<std::vector<double>>(), torch::kFloat64).to(dtype).reshape(shape);
}

TEST(SdkLabelSmoothing, MatchesTransformersLabelSmootherLossAndGradient) {
  const nlohmann::json data = goldens();
  ASSERT_EQ(data.at("cases").size(), 4u);
  for (const auto& c : data.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const auto shape = c.at("shape").get<std::vector<std::int64_t>>();
    const std::vector<std::int64_t> label_shape(shape.begin(), shape.end() - 1);
    torch::Tensor logits = tensor_of(c.at("logits"), shape, torch::kFloat32).requires_grad_(true);
    const torch::Tensor labels =
        torch::tensor(c.at("labels").get<std::vector<std::int64_t>>(), torch::kInt64).reshape(label_shape);
    const torch::Tensor loss = label_smoothed_loss(logits, labels, c.at("epsilon").get<double>());
    loss.backward();
    // The same libtorch and the same operations as the Python side: float32 to the last bit
    // but for the summation order of a reduction, hence a bound of a few ulps.
    EXPECT_NEAR(loss.item<double>(), c.at("loss").get<double>(), 4e-7 * std::abs(c.at("loss").get<double>()));
    const torch::Tensor expected = tensor_of(c.at("grad"), shape, torch::kFloat32);
    EXPECT_TRUE(torch::allclose(logits.grad(), expected, 1e-5, 1e-7)) << (logits.grad() - expected).abs().max();
  }
}

TEST(SdkLabelSmoothing, EpsilonZeroIsCrossEntropyAndIgnoredLabelsDoNotCount) {
  const torch::Tensor logits = torch::randn({6, 4}, torch::kFloat64);
  const torch::Tensor labels = torch::tensor({0, 3, 1, -100, 2, -100}, torch::kInt64);
  const torch::Tensor expected = torch::nn::functional::cross_entropy(logits, labels);  // ignore_index -100
  EXPECT_TRUE(torch::allclose(label_smoothed_loss(logits, labels, 0.0), expected)) << "epsilon 0";
  // With every row active, LabelSmoother is cross_entropy's label_smoothing (torch's docs).
  const torch::Tensor active = torch::tensor({0, 3, 1, 1, 2, 0}, torch::kInt64);
  const torch::Tensor torch_smoothed = torch::nn::functional::cross_entropy(
      logits, active, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(0.25));
  EXPECT_TRUE(torch::allclose(label_smoothed_loss(logits, active, 0.25), torch_smoothed));
}

TEST(SdkLabelSmoothing, FloatLabelsAreRefusedNamingTheArgument) {
  const torch::Tensor logits = torch::randn({3, 2});
  try {
    label_smoothed_loss(logits, torch::rand({3, 2}), 0.1);
    ADD_FAILURE() << "float (multi-label) targets were smoothed";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("TrainingArguments.label_smoothing_factor"), std::string::npos) << what;
    EXPECT_NE(what.find("single-label classification"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace tenax::sdk::detail
