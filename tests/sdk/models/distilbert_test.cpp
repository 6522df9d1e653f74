// DistilBertForSequenceClassification against Python transformers on a tiny DistilBERT that
// transformers initialised from a seed and saved (goldens/distilbert_tiny; the inputs and
// outputs in goldens/distilbert_parity.safetensors; tools/goldens/distilbert_goldens.py):
// config.json parsing, parameter names, every hidden state and the logits within 1e-4, the
// missing and unexpected keys transformers reports, and the model-type registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "sdk/models/roundtrip_fixture.h"
#include "sdk/models/minilm_fixture.h"
#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/sdk/models/auto_model.h"
#include "tenax/sdk/models/bert.h"
#include "tenax/sdk/models/distilbert.h"
#include "tenax/storage/safetensors.h"
#include "tensor_conversion.h"

namespace tenax::sdk {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kTolerance = 1e-4;

double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

json tiny_json() {
  return json::parse(files::read_all(test::distilbert_tiny_dir(test::goldens_dir()) / "config.json"));
}

std::string config_error_of(const json& j) {
  try {
    DistilBertConfig::from_json_string(j.dump(), "some/config.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "parsed " << j.dump();
  return {};
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<std::string> json_strings(const json& j) { return j.get<std::vector<std::string>>(); }

class DistilBertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    goldens_ = test::read_goldens(test::goldens_dir() / "distilbert_parity.safetensors");
    meta_ = test::read_golden_metadata(test::goldens_dir() / "distilbert_parity.safetensors");
    root_ = fs::temp_directory_path() / ("tenax-distilbert-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::shared_ptr<DistilBertForSequenceClassification> tiny() {
    auto model = DistilBertForSequenceClassification::from_pretrained(test::distilbert_tiny_dir(test::goldens_dir()));
    model->eval();
    return model;
  }

  // A model directory with the tiny config and, for each of `keys`, the tiny model's tensor of
  // that name (looked up with and without the "distilbert." prefix) or a stand-in for a tensor
  // no DistilBertForSequenceClassification parameter takes.
  fs::path write_checkpoint(const std::string& name, const std::vector<std::string>& keys) {
    const fs::path dir = root_ / name;
    fs::create_directories(dir);
    files::atomic_write(dir / "config.json", tiny_json().dump());
    auto params = tiny()->named_parameters();
    std::vector<torch::Tensor> keep;
    std::vector<storage::TensorRef> refs;
    for (const std::string& key : keys) {
      const torch::Tensor* p = params.find(key);
      if (p == nullptr) p = params.find("distilbert." + key);
      keep.push_back(p != nullptr ? contiguous_cpu(p->detach()) : torch::ones({2}));
      refs.push_back(make_ref(key, keep.back()));
    }
    EXPECT_TRUE(storage::write_safetensors(dir / "model.safetensors", refs, {{"format", "pt"}}).is_ok());
    return dir;
  }

  std::map<std::string, torch::Tensor> goldens_;
  std::map<std::string, std::string> meta_;
  fs::path root_;
};

TEST_F(DistilBertTest, ParsesTransformersConfigJson) {
  const auto c = DistilBertConfig::from_json_file(test::distilbert_tiny_dir(test::goldens_dir()) / "config.json");
  EXPECT_EQ(c.vocab_size, 3000);
  EXPECT_EQ(c.dim, 32);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.hidden_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 128);
  EXPECT_DOUBLE_EQ(c.initializer_range, 0.2);
  EXPECT_DOUBLE_EQ(c.seq_classif_dropout, 0.2);
  EXPECT_EQ(c.id2label, (Id2Label{{0, "negative"}, {1, "neutral"}, {2, "positive"}}));
  EXPECT_FALSE(c.sinusoidal_pos_embds);
  // What Tenax writes parses back to the same config.
  const auto back = DistilBertConfig::from_json_string(c.to_json_string(), "written");
  EXPECT_EQ(back.to_json_string(), c.to_json_string());
  EXPECT_EQ(json::parse(c.to_json_string())["architectures"], json::array({"DistilBertForSequenceClassification"}));
}

TEST_F(DistilBertTest, BadConfigValuesAreNamed) {
  json j = tiny_json();
  j.erase("dim");
  EXPECT_NE(config_error_of(j).find("some/config.json: key \"dim\": missing"), std::string::npos);
  j = tiny_json();
  j["n_heads"] = 5;
  EXPECT_NE(config_error_of(j).find("\"dim\": 32 is not a multiple of n_heads (5)"), std::string::npos);
  j = tiny_json();
  j["activation"] = "gelu_new";
  EXPECT_NE(config_error_of(j).find("\"activation\": \"gelu_new\" is not supported"), std::string::npos);
  j = tiny_json();
  j["model_type"] = "bert";
  EXPECT_NE(config_error_of(j).find("\"model_type\": \"bert\" is not supported"), std::string::npos);
  j = tiny_json();
  j["sinusoidal_pos_embds"] = 1;
  EXPECT_NE(config_error_of(j).find("\"sinusoidal_pos_embds\": expected true or false"), std::string::npos);
}

TEST_F(DistilBertTest, ParameterNamesAndShapesAreTransformersStateDict) {
  auto read = storage::read_safetensors(test::distilbert_tiny_dir(test::goldens_dir()) / "model.safetensors");
  ASSERT_TRUE(read.is_ok()) << read.status().message();
  std::map<std::string, std::vector<std::int64_t>> saved;
  for (const auto& e : read.value().tensors()) saved[e.name] = e.shape;
  std::map<std::string, std::vector<std::int64_t>> ours;
  for (const auto& item : tiny()->named_parameters()) {
    ours[item.key()] = {item.value().sizes().begin(), item.value().sizes().end()};
  }
  EXPECT_EQ(ours, saved);
}

TEST_F(DistilBertTest, HiddenStatesLogitsAndLossMatchTransformers) {
  auto model = tiny();
  EXPECT_TRUE(model->loading_info().missing_keys.empty());
  EXPECT_TRUE(model->loading_info().unexpected_keys.empty());
  torch::NoGradGuard no_grad;
  const auto encoded = model->distilbert().forward(goldens_.at("input_ids"), goldens_.at("attention_mask"));
  ASSERT_EQ(encoded.hidden_states.size(), 3u);
  for (std::size_t i = 0; i < encoded.hidden_states.size(); ++i) {
    const double diff = max_diff(encoded.hidden_states[i], goldens_.at("hidden_state_" + std::to_string(i)));
    std::cout << "hidden state " << i << ": max |diff| " << diff << "\n";
    EXPECT_LE(diff, kTolerance) << "hidden state " << i;
  }
  Batch batch;
  batch.input_ids = goldens_.at("input_ids");
  batch.attention_mask = goldens_.at("attention_mask");
  batch.token_type_ids = torch::ones_like(batch.input_ids);  // DistilBERT has no token types: ignored
  batch.labels = goldens_.at("labels");
  const ModelOutput out = model->forward(batch);
  const double diff = max_diff(out.logits, goldens_.at("logits"));
  std::cout << "logits: max |diff| " << diff << "\n";
  EXPECT_LE(diff, kTolerance);
  EXPECT_NEAR(out.loss.item<double>(), goldens_.at("loss").item<double>(), kTolerance);
  EXPECT_EQ(model->config().problem_type, ProblemType::kSingleLabelClassification);  // decided, as transformers

  // Not vacuous: the rows differ, and the padding mask changes the padded row beyond the bound.
  EXPECT_GT(max_diff(goldens_.at("logits")[0], goldens_.at("logits")[1]), 100 * kTolerance);
  const auto unmasked = model->forward(goldens_.at("input_ids"), {}).logits;
  EXPECT_GT(max_diff(unmasked[1], goldens_.at("logits")[1]), 100 * kTolerance);
  EXPECT_LE(max_diff(unmasked[0], goldens_.at("logits")[0]), kTolerance);  // row 0 has no padding
}

TEST_F(DistilBertTest, TrainModeAppliesDropoutAndEvalIsDeterministic) {
  auto model = tiny();
  torch::NoGradGuard no_grad;
  const auto a = model->forward(goldens_.at("input_ids"), goldens_.at("attention_mask")).logits;
  EXPECT_TRUE(torch::equal(a, model->forward(goldens_.at("input_ids"), goldens_.at("attention_mask")).logits));
  model->train();
  const auto b = model->forward(goldens_.at("input_ids"), goldens_.at("attention_mask")).logits;
  EXPECT_GT(max_diff(a, b), kTolerance);
}

TEST_F(DistilBertTest, FreshSinusoidalPositionsEqualTransformers) {
  auto config = DistilBertConfig::from_json_file(test::distilbert_tiny_dir(test::goldens_dir()) / "config.json");
  config.sinusoidal_pos_embds = true;
  DistilBertModel model(config);
  const auto params = model.named_parameters();
  EXPECT_LE(max_diff(params["embeddings.position_embeddings.weight"], goldens_.at("sinusoidal_position_embeddings")),
            1e-6);
}

TEST_F(DistilBertTest, BaseModelCheckpointLoadsIntoDistilbertAndReportsTheHeadAsTransformersDoes) {
  const json base = json::parse(meta_.at("base_model_loading"));
  const fs::path dir = write_checkpoint("base", json_strings(base["checkpoint_keys"]));
  auto model = DistilBertForSequenceClassification::from_pretrained(dir, PretrainedOptions().num_labels(3));
  EXPECT_EQ(sorted(model->loading_info().missing_keys), json_strings(base["missing_keys"]));
  EXPECT_EQ(sorted(model->loading_info().unexpected_keys), json_strings(base["unexpected_keys"]));
  const auto loaded = model->named_parameters();
  const auto original = tiny()->named_parameters();
  EXPECT_TRUE(torch::equal(loaded["distilbert.transformer.layer.1.ffn.lin2.weight"],
                           original["distilbert.transformer.layer.1.ffn.lin2.weight"]));
  // The new head is initialised as transformers does: N(0, initializer_range), zero bias.
  const auto w = loaded["pre_classifier.weight"];
  EXPECT_NEAR(w.std().item<double>(), 0.2, 0.03);
  EXPECT_TRUE(torch::equal(loaded["classifier.bias"], torch::zeros({3})));
}

TEST_F(DistilBertTest, MaskedLmCheckpointReportsMissingAndUnexpectedAsTransformersDoes) {
  const json mlm = json::parse(meta_.at("masked_lm_loading"));
  std::vector<std::string> keys = json_strings(mlm["checkpoint_keys"]);
  keys.push_back("distilbert.embeddings.position_ids");  // an old checkpoint's non-persistent buffer: ignored
  const fs::path dir = write_checkpoint("mlm", keys);
  auto model = DistilBertForSequenceClassification::from_pretrained(dir, PretrainedOptions().num_labels(3));
  EXPECT_EQ(sorted(model->loading_info().missing_keys), json_strings(mlm["missing_keys"]));
  EXPECT_EQ(sorted(model->loading_info().unexpected_keys), json_strings(mlm["unexpected_keys"]));
}

TEST_F(DistilBertTest, HeadOfOtherShapeFailsOrIsReinitialisedWithIgnoreMismatchedSizes) {
  const fs::path dir = test::distilbert_tiny_dir(test::goldens_dir());
  try {
    DistilBertForSequenceClassification::from_pretrained(dir, PretrainedOptions().num_labels(2));
    ADD_FAILURE() << "a 3-label head loaded into a 2-label model";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("ignore_mismatched_sizes(true)"), std::string::npos) << e.what();
  }
  const json expected = json::parse(meta_.at("mismatched_head_loading"));
  torch::manual_seed(5);
  auto model = DistilBertForSequenceClassification::from_pretrained(
      dir, PretrainedOptions().num_labels(2).ignore_mismatched_sizes(true));
  EXPECT_EQ(sorted(model->loading_info().mismatched_keys), json_strings(expected["mismatched_keys"]));
  EXPECT_EQ(sorted(model->loading_info().missing_keys), json_strings(expected["missing_keys"]));
  EXPECT_EQ(sorted(model->loading_info().unexpected_keys), json_strings(expected["unexpected_keys"]));
  const auto params = model->named_parameters();
  EXPECT_EQ(params["classifier.weight"].sizes(), (std::vector<std::int64_t>{2, 32}));
  EXPECT_TRUE(torch::equal(params["classifier.bias"], torch::zeros({2})));
  // Everything else is the checkpoint's, pre_classifier included.
  EXPECT_TRUE(torch::equal(params["pre_classifier.weight"], tiny()->named_parameters()["pre_classifier.weight"]));
}

TEST_F(DistilBertTest, SaveThenLoadIsIdenticalAndCarriesTheTokenizerFiles) {
  auto model = tiny();
  model->save_pretrained(root_ / "saved");
  auto loaded = DistilBertForSequenceClassification::from_pretrained(root_ / "saved");
  EXPECT_TRUE(loaded->loading_info().missing_keys.empty());
  EXPECT_TRUE(loaded->loading_info().unexpected_keys.empty());
  const auto original = model->named_parameters();
  for (const auto& item : loaded->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), original[item.key()])) << item.key();
  }
  EXPECT_EQ(loaded->config().to_json_string(), model->config().to_json_string());
  const fs::path source = test::distilbert_tiny_dir(test::goldens_dir());
  for (const char* file : {"vocab.txt", "tokenizer_config.json"}) {
    EXPECT_EQ(files::read_all(root_ / "saved" / file), files::read_all(source / file)) << file;
  }
}

TEST_F(DistilBertTest, AutoModelPicksTheFamilyByModelType) {
  auto any = AutoModelForClassification::from_pretrained(test::distilbert_tiny_dir(test::goldens_dir()));
  ASSERT_NE(std::dynamic_pointer_cast<DistilBertForSequenceClassification>(any), nullptr);
  EXPECT_EQ(any->info().architecture, "DistilBertForSequenceClassification");
  EXPECT_EQ(any->pretrained_config().num_labels(), 3);

  BertConfig bert_config;
  bert_config.vocab_size = 50;
  bert_config.hidden_size = 8;
  bert_config.num_hidden_layers = 1;
  bert_config.num_attention_heads = 2;
  bert_config.intermediate_size = 16;
  bert_config.max_position_embeddings = 16;
  BertForSequenceClassification(bert_config).save_pretrained(root_ / "bert");
  EXPECT_NE(std::dynamic_pointer_cast<BertForSequenceClassification>(
                AutoModelForClassification::from_pretrained(root_ / "bert")),
            nullptr);
  EXPECT_EQ(AutoModelForClassification::model_types(), (std::vector<std::string>{"bert", "distilbert", "vit"}));

  json j = tiny_json();
  j["model_type"] = "gpt2";
  fs::create_directories(root_ / "gpt2");
  files::atomic_write(root_ / "gpt2" / "config.json", j.dump());
  try {
    AutoModelForClassification::from_pretrained(root_ / "gpt2");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("\"gpt2\" is not a registered model family (registered: \"bert\", "
                                         "\"distilbert\", \"vit\")"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(DistilBertTest, ForwardRejectsBadShapes) {
  auto model = tiny();
  EXPECT_THROW(model->forward(torch::zeros({2, 129}, torch::kInt64), {}), ConfigError);
  EXPECT_THROW(model->forward(torch::zeros({2, 4}, torch::kInt64), torch::ones({2, 5}, torch::kInt64)), ConfigError);
  EXPECT_THROW(model->forward(torch::zeros({4}, torch::kInt64), {}), ConfigError);
}

}  // namespace
}  // namespace tenax::sdk
