// BertForSequenceClassification against Python transformers on the real all-MiniLM-L6-v2
// weights: goldens from tools/goldens/model_goldens.py (fp32, eval mode).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include <torch/optim/adamw.h>
#include <torch/utils.h>

#include "sdk/models/minilm_fixture.h"
#include "tenax/sdk/models/bert.h"

namespace tenax::sdk {
namespace {

constexpr double kTolerance = 1e-4;

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  return (a - b).abs().max().item<double>();
}

class BertParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::minilm_with_golden_head(test::minilm_dir(), test::goldens_dir());
    model_->eval();
    golden_ = test::read_goldens(test::goldens_dir() / "minilm_parity.safetensors");
  }
  std::shared_ptr<BertForSequenceClassification> model_;
  std::map<std::string, torch::Tensor> golden_;
};

TEST_F(BertParityTest, ParameterNamesAreTransformersStateDictNames) {
  const auto params = model_->named_parameters();
  // 5 embedding tensors + 16 per layer x 6 + pooler 2 + classifier 2.
  EXPECT_EQ(params.size(), 5u + 16u * 6u + 2u + 2u);
  for (const char* name :
       {"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
        "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
        "bert.encoder.layer.0.attention.self.query.weight", "bert.encoder.layer.0.attention.output.dense.bias",
        "bert.encoder.layer.5.attention.output.LayerNorm.weight", "bert.encoder.layer.5.intermediate.dense.weight",
        "bert.encoder.layer.5.output.dense.weight", "bert.encoder.layer.5.output.LayerNorm.bias",
        "bert.pooler.dense.weight", "classifier.weight", "classifier.bias"}) {
    EXPECT_NE(params.find(name), nullptr) << name;
  }
}

TEST_F(BertParityTest, PretrainedLoadReportsOnlyTheNewClassifierMissing) {
  const auto& info = model_->loading_info();
  EXPECT_EQ(info.missing_keys, (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  EXPECT_TRUE(info.unexpected_keys.empty());  // embeddings.position_ids is a buffer, ignored
}

TEST_F(BertParityTest, HiddenStatesPooledOutputAndLogitsMatchTransformers) {
  torch::NoGradGuard no_grad;
  const auto& ids = golden_.at("input_ids");
  const auto& mask = golden_.at("attention_mask");
  const auto& types = golden_.at("token_type_ids");
  const BertOutput encoded = model_->bert().forward(ids, mask, types);
  const ModelOutput out = model_->forward(ids, mask, types, golden_.at("labels"));

  const double hidden_diff = max_abs_diff(encoded.last_hidden_state, golden_.at("last_hidden_state"));
  const double pooled_diff = max_abs_diff(encoded.pooler_output, golden_.at("pooler_output"));
  const double logits_diff = max_abs_diff(out.logits, golden_.at("logits"));
  const double loss_diff = std::abs(out.loss.item<double>() - golden_.at("loss").item<double>());
  RecordProperty("max_abs_diff_hidden", std::to_string(hidden_diff));
  RecordProperty("max_abs_diff_logits", std::to_string(logits_diff));
  std::cout << "max |diff|: last_hidden_state " << hidden_diff << ", pooler_output " << pooled_diff << ", logits "
            << logits_diff << ", loss " << loss_diff << "\n";
  EXPECT_LE(hidden_diff, kTolerance);
  EXPECT_LE(pooled_diff, kTolerance);
  EXPECT_LE(logits_diff, kTolerance);
  EXPECT_LE(loss_diff, kTolerance);
}

// The goldens are sensitive to what the parity test claims: dropping the attention mask
// changes the padded row (row 1) and dropping token types changes the pair (row 2) far beyond
// the tolerance, while the unpadded single sentence (row 0) is unaffected by either.
TEST_F(BertParityTest, PaddingAndTokenTypesMatterBeyondTheTolerance) {
  torch::NoGradGuard no_grad;
  const auto& ids = golden_.at("input_ids");
  const auto& hidden = golden_.at("last_hidden_state");
  const auto no_mask = model_->bert().forward(ids, {}, golden_.at("token_type_ids")).last_hidden_state;
  EXPECT_GT(max_abs_diff(no_mask[1], hidden[1]), 100 * kTolerance);
  EXPECT_LE(max_abs_diff(no_mask[0], hidden[0]), kTolerance);
  const auto no_types = model_->bert().forward(ids, golden_.at("attention_mask"), {}).last_hidden_state;
  EXPECT_GT(max_abs_diff(no_types[2], hidden[2]), 100 * kTolerance);
  EXPECT_LE(max_abs_diff(no_types[0], hidden[0]), kTolerance);
}

TEST_F(BertParityTest, EvalModeIsDeterministicAndTrainModeAppliesDropout) {
  torch::NoGradGuard no_grad;
  const auto& ids = golden_.at("input_ids");
  const auto& mask = golden_.at("attention_mask");
  const auto& types = golden_.at("token_type_ids");
  const auto a = model_->forward(ids, mask, types).logits;
  const auto b = model_->forward(ids, mask, types).logits;
  EXPECT_TRUE(torch::equal(a, b));
  model_->train();
  torch::manual_seed(1);
  const auto c = model_->forward(ids, mask, types).logits;
  EXPECT_GT(max_abs_diff(a, c), 100 * kTolerance);
}

TEST_F(BertParityTest, TrainingStepsWithDropoutReduceTheLossOnATinyBatch) {
  torch::manual_seed(7);
  model_->train();
  torch::optim::AdamW optimizer(model_->parameters(), torch::optim::AdamWOptions(1e-3));
  Batch batch;
  batch.input_ids = golden_.at("input_ids");
  batch.attention_mask = golden_.at("attention_mask");
  batch.token_type_ids = golden_.at("token_type_ids");
  batch.labels = golden_.at("labels");
  auto eval_loss = [&] {
    torch::NoGradGuard no_grad;
    model_->eval();
    const double loss = model_->forward(batch).loss.item<double>();
    model_->train();
    return loss;
  };
  const double before = eval_loss();
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    const ModelOutput out = model_->forward(batch);
    ASSERT_TRUE(out.loss.defined());
    out.loss.backward();
    optimizer.step();
  }
  const double after = eval_loss();
  EXPECT_LT(after, 0.5 * before) << "before " << before << ", after " << after;
  EXPECT_EQ(model_->config().problem_type, ProblemType::kSingleLabelClassification);
}

TEST_F(BertParityTest, RegressionHeadUsesMseOnSqueezedLogits) {
  auto model =
      BertForSequenceClassification::from_pretrained(test::minilm_dir(), BertPretrainedOptions().num_labels(1));
  model->eval();
  torch::NoGradGuard no_grad;
  const auto labels = torch::tensor({0.5f, -1.0f, 2.0f});
  const ModelOutput out =
      model->forward(golden_.at("input_ids"), golden_.at("attention_mask"), golden_.at("token_type_ids"), labels);
  EXPECT_EQ(model->config().problem_type, ProblemType::kRegression);
  ASSERT_EQ(out.logits.sizes(), (std::vector<std::int64_t>{3, 1}));
  const double expected = (out.logits.squeeze() - labels).pow(2).mean().item<double>();
  EXPECT_NEAR(out.loss.item<double>(), expected, 1e-6);
}

TEST_F(BertParityTest, FloatLabelsWithSeveralOutputsAreMultiLabel) {
  torch::NoGradGuard no_grad;
  const auto labels = torch::tensor({{1.0f, 0.0f, 1.0f}, {0.0f, 0.0f, 1.0f}, {0.0f, 1.0f, 0.0f}});
  const ModelOutput out =
      model_->forward(golden_.at("input_ids"), golden_.at("attention_mask"), golden_.at("token_type_ids"), labels);
  EXPECT_EQ(model_->config().problem_type, ProblemType::kMultiLabelClassification);
  const auto p = torch::sigmoid(out.logits);
  const double expected = -(labels * p.log() + (1 - labels) * (1 - p).log()).mean().item<double>();
  EXPECT_NEAR(out.loss.item<double>(), expected, 1e-5);
}

TEST(MiniLmAssets, MissingAssetsFailNamingTheFetchScript) {
  ::setenv("TENAX_ASSETS", "/nonexistent-tenax-assets", 1);
  try {
    test::minilm_dir();
    ADD_FAILURE() << "no error for a missing asset directory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("tools/fetch_assets.sh"), std::string::npos) << e.what();
  }
  ::unsetenv("TENAX_ASSETS");
}

}  // namespace
}  // namespace tenax::sdk
