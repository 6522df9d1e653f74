// ViTForImageClassification against Python transformers on a tiny ViT that transformers
// initialised from a seed and saved (goldens/vit_tiny; inputs and outputs in
// goldens/vit_parity.safetensors; tools/goldens/vit_goldens.py): config.json parsing, parameter
// names, every hidden state and the logits within 1e-4 (also with the position table
// interpolated to other image sizes), and the keys transformers reports for a bare ViTModel.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "sdk/models/minilm_fixture.h"
#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/sdk/models/auto_model.h"
#include "tenax/sdk/models/vit.h"
#include "tenax/storage/safetensors.h"
#include "tensor_conversion.h"

namespace tenax::sdk {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kTolerance = 1e-4;

double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }
fs::path tiny_dir() { return test::goldens_dir() / "vit_tiny"; }
json tiny_json() { return json::parse(files::read_all(tiny_dir() / "config.json")); }

std::string config_error_of(const json& j) {
  try {
    ViTConfig::from_json_string(j.dump(), "some/config.json");
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

class ViTTest : public ::testing::Test {
 protected:
  void SetUp() override {
    goldens_ = test::read_goldens(test::goldens_dir() / "vit_parity.safetensors");
    meta_ = test::read_golden_metadata(test::goldens_dir() / "vit_parity.safetensors");
    root_ = fs::temp_directory_path() / ("tenax-vit-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::shared_ptr<ViTForImageClassification> tiny() {
    auto model = ViTForImageClassification::from_pretrained(tiny_dir());
    model->eval();
    return model;
  }

  std::map<std::string, torch::Tensor> goldens_;
  std::map<std::string, std::string> meta_;
  fs::path root_;
};

TEST_F(ViTTest, ParsesTransformersConfigJsonAndRefusesWhatItDoesNotCompute) {
  const auto c = ViTConfig::from_json_file(tiny_dir() / "config.json");
  EXPECT_EQ(c.image_size, 32);
  EXPECT_EQ(c.patch_size, 8);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_channels, 3);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_EQ(c.id2label, (Id2Label{{0, "cat"}, {1, "dog"}, {2, "bird"}}));
  EXPECT_EQ(ViTConfig::from_json_string(c.to_json_string(), "written").to_json_string(), c.to_json_string());

  json j = tiny_json();
  j["patch_size"] = 5;
  EXPECT_NE(config_error_of(j).find("\"image_size\": 32 is not a multiple of patch_size (5)"), std::string::npos);
  j = tiny_json();
  j["image_size"] = {32, 48};
  EXPECT_NE(config_error_of(j).find("\"image_size\": a [height, width] list is not supported"), std::string::npos);
  j = tiny_json();
  j["hidden_act"] = "gelu_new";
  EXPECT_NE(config_error_of(j).find("\"hidden_act\": \"gelu_new\" is not supported"), std::string::npos);
  j = tiny_json();
  j.erase("patch_size");
  EXPECT_NE(config_error_of(j).find("\"patch_size\": missing"), std::string::npos);
}

TEST_F(ViTTest, ParameterNamesAndShapesAreTransformersStateDict) {
  auto read = storage::read_safetensors(tiny_dir() / "model.safetensors");
  ASSERT_TRUE(read.is_ok()) << read.status().message();
  std::map<std::string, std::vector<std::int64_t>> saved;
  for (const auto& e : read.value().tensors()) saved[e.name] = e.shape;
  std::map<std::string, std::vector<std::int64_t>> ours;
  for (const auto& item : tiny()->named_parameters()) {
    ours[item.key()] = {item.value().sizes().begin(), item.value().sizes().end()};
  }
  EXPECT_EQ(ours, saved);
}

TEST_F(ViTTest, HiddenStatesLogitsAndLossMatchTransformers) {
  auto model = tiny();
  EXPECT_TRUE(model->loading_info().missing_keys.empty());
  EXPECT_TRUE(model->loading_info().unexpected_keys.empty());
  torch::NoGradGuard no_grad;
  const auto encoded = model->vit().forward(goldens_.at("pixel_values"));
  ASSERT_EQ(encoded.hidden_states.size(), 3u);
  for (std::size_t i = 0; i < encoded.hidden_states.size(); ++i) {
    const double diff = max_diff(encoded.hidden_states[i], goldens_.at("hidden_state_" + std::to_string(i)));
    std::cout << "hidden state " << i << ": max |diff| " << diff << "\n";
    EXPECT_LE(diff, kTolerance) << "hidden state " << i;
  }
  EXPECT_LE(max_diff(encoded.last_hidden_state, goldens_.at("last_hidden_state")), kTolerance);
  EXPECT_FALSE(encoded.pooler_output.defined());  // ViTForImageClassification's ViTModel has no pooler
  Batch batch;
  batch.pixel_values = goldens_.at("pixel_values");
  batch.labels = goldens_.at("labels");
  const ModelOutput out = model->forward(batch);
  const double diff = max_diff(out.logits, goldens_.at("logits"));
  std::cout << "logits: max |diff| " << diff << "\n";
  EXPECT_LE(diff, kTolerance);
  EXPECT_NEAR(out.loss.item<double>(), goldens_.at("loss").item<double>(), kTolerance);
  EXPECT_GT(max_diff(goldens_.at("logits")[0], goldens_.at("logits")[1]), 100 * kTolerance);  // not vacuous
}

TEST_F(ViTTest, InterpolatedPositionEncodingMatchesTransformersForOtherImageSizes) {
  auto model = tiny();
  torch::NoGradGuard no_grad;
  for (const char* size : {"48x48", "32x48"}) {
    const auto logits =
        model->forward(goldens_.at(std::string("pixel_values_") + size), {}, PositionEncoding::kInterpolate).logits;
    const double diff = max_diff(logits, goldens_.at(std::string("logits_") + size));
    std::cout << size << " logits: max |diff| " << diff << "\n";
    EXPECT_LE(diff, kTolerance) << size;
  }
  // Without interpolation another size is refused, naming both sizes.
  try {
    model->forward(goldens_.at("pixel_values_48x48"));
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("input image size (48*48) doesn't match the model (32*32)"), std::string::npos)
        << e.what();
  }
  // At the trained size, interpolation is the identity (transformers returns the table as is).
  EXPECT_TRUE(torch::equal(model->forward(goldens_.at("pixel_values"), {}, PositionEncoding::kInterpolate).logits,
                           model->forward(goldens_.at("pixel_values")).logits));
}

TEST_F(ViTTest, TrainModeAppliesDropoutAndBadInputsAreNamed) {
  auto model = tiny();
  torch::NoGradGuard no_grad;
  const auto a = model->forward(goldens_.at("pixel_values")).logits;
  model->train();
  EXPECT_GT(max_diff(a, model->forward(goldens_.at("pixel_values")).logits), kTolerance);
  EXPECT_THROW(model->forward(torch::zeros({1, 1, 32, 32})), ConfigError);  // channels
  EXPECT_THROW(model->forward(torch::zeros({3, 32, 32})), ConfigError);     // no batch dim
  EXPECT_THROW(model->forward(Batch{}), ConfigError);                       // no pixel_values
  EXPECT_THROW(model->forward(torch::zeros({1, 3, 36, 36}), {}, PositionEncoding::kInterpolate), ConfigError);
}

TEST_F(ViTTest, BareViTModelCheckpointReportsWhatTransformersReports) {
  const json base = json::parse(meta_.at("base_model_loading"));
  const fs::path dir = root_ / "base";
  fs::create_directories(dir);
  files::atomic_write(dir / "config.json", tiny_json().dump());
  auto params = tiny()->named_parameters();
  std::vector<torch::Tensor> keep;
  std::vector<storage::TensorRef> refs;
  for (const std::string& key : base["checkpoint_keys"].get<std::vector<std::string>>()) {
    const torch::Tensor* p = params.find("vit." + key);
    keep.push_back(p != nullptr ? contiguous_cpu(p->detach()) : torch::ones({32}));
    refs.push_back(make_ref(key, keep.back()));
  }
  ASSERT_TRUE(storage::write_safetensors(dir / "model.safetensors", refs, {{"format", "pt"}}).is_ok());
  auto model = ViTForImageClassification::from_pretrained(dir);
  EXPECT_EQ(sorted(model->loading_info().missing_keys), base["missing_keys"].get<std::vector<std::string>>());
  EXPECT_EQ(sorted(model->loading_info().unexpected_keys), base["unexpected_keys"].get<std::vector<std::string>>());
  EXPECT_TRUE(torch::equal(model->named_parameters()["vit.embeddings.cls_token"], params["vit.embeddings.cls_token"]));
}

TEST_F(ViTTest, SaveThenLoadIsIdenticalAndAutoModelFindsTheFamily) {
  auto model = tiny();
  model->save_pretrained(root_ / "saved");
  auto loaded = AutoModelForClassification::from_pretrained(root_ / "saved");
  auto vit = std::dynamic_pointer_cast<ViTForImageClassification>(loaded);
  ASSERT_NE(vit, nullptr);
  EXPECT_TRUE(vit->loading_info().missing_keys.empty());
  const auto original = model->named_parameters();
  for (const auto& item : vit->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), original[item.key()])) << item.key();
  }
  EXPECT_EQ(vit->config().to_json_string(), model->config().to_json_string());
}

TEST(ViTInit, FreshModelIsInitialisedAsTransformersDoes) {
  ViTConfig c;
  c.hidden_size = 64;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 4;
  c.intermediate_size = 128;
  c.image_size = 64;
  c.patch_size = 8;
  torch::manual_seed(1);
  ViTForImageClassification model(c);
  auto params = model.named_parameters();
  for (const char* name : {"vit.embeddings.position_embeddings", "vit.embeddings.patch_embeddings.projection.weight",
                           "vit.encoder.layer.0.attention.attention.query.weight", "classifier.weight"}) {
    EXPECT_NEAR(params[name].std().item<double>(), 0.02, 0.004) << name;
  }
  EXPECT_TRUE(torch::equal(params["classifier.bias"], torch::zeros({2})));
  EXPECT_TRUE(torch::equal(params["vit.layernorm.weight"], torch::ones({64})));
}

}  // namespace
}  // namespace tenax::sdk
