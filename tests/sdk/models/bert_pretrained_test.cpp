// from_pretrained / save_pretrained on a tiny BERT: prefixes, missing and unexpected tensors,
// bad checkpoints (wrong shape, wrong dtype, missing or corrupt file) and the atomic save.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <unistd.h>

#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/sdk/models/bert.h"
#include "tenax/storage/safetensors.h"
#include "tensor_conversion.h"

namespace tenax::sdk {
namespace {
namespace fs = std::filesystem;

BertConfig tiny_config() {
  BertConfig c;
  c.vocab_size = 50;
  c.hidden_size = 8;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 16;
  c.max_position_embeddings = 16;
  return c;
}

class BertPretrainedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("tenax-bert-pretrained-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    torch::manual_seed(3);
    model_ = std::make_shared<BertForSequenceClassification>(tiny_config());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // Writes a model directory holding `tensors` (name -> tensor) and the tiny config.
  fs::path write_checkpoint(const std::string& name, const std::map<std::string, torch::Tensor>& tensors) {
    const fs::path dir = root_ / name;
    fs::create_directories(dir);
    files::atomic_write(dir / "config.json", tiny_config().to_json_string());
    std::vector<torch::Tensor> keep;
    std::vector<storage::TensorRef> refs;
    for (const auto& [n, t] : tensors) {
      keep.push_back(contiguous_cpu(t));
      refs.push_back(make_ref(n, keep.back()));
    }
    EXPECT_TRUE(storage::write_safetensors(dir / "model.safetensors", refs, {{"format", "pt"}}).is_ok());
    return dir;
  }

  std::map<std::string, torch::Tensor> state(const std::string& strip_prefix = "") {
    std::map<std::string, torch::Tensor> out;
    for (const auto& item : model_->named_parameters()) {
      std::string name = item.key();
      if (!strip_prefix.empty()) {
        if (name.rfind(strip_prefix, 0) != 0) continue;  // a base model has no head
        name = name.substr(strip_prefix.size());
      }
      out[name] = item.value().detach().clone();
    }
    return out;
  }

  template <typename E>
  std::string expect_throw(const fs::path& dir) {
    try {
      BertForSequenceClassification::from_pretrained(dir);
      ADD_FAILURE() << "loaded " << dir;
    } catch (const E& e) {
      return e.what();
    }
    return {};
  }

  fs::path root_;
  std::shared_ptr<BertForSequenceClassification> model_;
};

TEST_F(BertPretrainedTest, SaveThenLoadGivesIdenticalParametersAndConfig) {
  model_->save_pretrained(root_ / "saved");
  auto loaded = BertForSequenceClassification::from_pretrained(root_ / "saved");
  EXPECT_TRUE(loaded->loading_info().missing_keys.empty());
  EXPECT_TRUE(loaded->loading_info().unexpected_keys.empty());
  const auto original = model_->named_parameters();
  for (const auto& item : loaded->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), original[item.key()])) << item.key();
  }
  EXPECT_EQ(loaded->config().to_json_string(), model_->config().to_json_string());
  EXPECT_EQ(loaded->pretrained_dir(), root_ / "saved");
}

TEST_F(BertPretrainedTest, BaseModelCheckpointWithoutPrefixLoadsIntoBertAndHeadIsMissing) {
  auto tensors = state("bert.");
  tensors["embeddings.position_ids"] = torch::arange(16).unsqueeze(0);  // old-style buffer
  const fs::path dir = write_checkpoint("base", tensors);
  torch::manual_seed(99);  // a different fresh head than model_'s
  auto loaded = BertForSequenceClassification::from_pretrained(dir, BertPretrainedOptions().num_labels(4));
  EXPECT_EQ(loaded->loading_info().missing_keys, (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  EXPECT_TRUE(loaded->loading_info().unexpected_keys.empty());
  const auto original = model_->named_parameters();
  const auto params = loaded->named_parameters();
  EXPECT_TRUE(torch::equal(params["bert.encoder.layer.1.output.dense.weight"],
                           original["bert.encoder.layer.1.output.dense.weight"]));
  // The new head is initialised as transformers does: N(0, 0.02) weights, zero bias.
  EXPECT_EQ(params["classifier.weight"].sizes(), (std::vector<std::int64_t>{4, 8}));
  EXPECT_TRUE(torch::equal(params["classifier.bias"], torch::zeros({4})));
  EXPECT_LT(params["classifier.weight"].abs().max().item<double>(), 0.2);
  EXPECT_GT(params["classifier.weight"].abs().max().item<double>(), 0.0);
}

TEST_F(BertPretrainedTest, MissingTensorIsReportedAndUnexpectedOnesListed) {
  auto tensors = state();
  tensors.erase("bert.pooler.dense.weight");
  tensors["bert.encoder.layer.7.output.dense.weight"] = torch::zeros({8, 16});
  const fs::path dir = write_checkpoint("partial", tensors);
  auto loaded = BertForSequenceClassification::from_pretrained(dir);
  EXPECT_EQ(loaded->loading_info().missing_keys, (std::vector<std::string>{"bert.pooler.dense.weight"}));
  EXPECT_EQ(loaded->loading_info().unexpected_keys,
            (std::vector<std::string>{"bert.encoder.layer.7.output.dense.weight"}));
}

TEST_F(BertPretrainedTest, WrongShapeNamesTheTensorAndFile) {
  auto tensors = state();
  tensors["bert.encoder.layer.0.attention.self.key.weight"] = torch::zeros({8, 4});
  const std::string what = expect_throw<ConfigError>(write_checkpoint("shape", tensors));
  EXPECT_NE(what.find("model.safetensors: tensor 'bert.encoder.layer.0.attention.self.key.weight' "
                      "has shape [8, 4] but parameter"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("has shape [8, 8]"), std::string::npos) << what;
}

TEST_F(BertPretrainedTest, NonFloatingDtypeNamesTheTensor) {
  auto tensors = state();
  tensors["bert.embeddings.LayerNorm.weight"] = torch::ones({8}, torch::kInt64);
  const std::string what = expect_throw<StorageError>(write_checkpoint("dtype", tensors));
  EXPECT_NE(what.find("tensor 'bert.embeddings.LayerNorm.weight' has dtype I64"), std::string::npos) << what;
}

TEST_F(BertPretrainedTest, HalfPrecisionCheckpointIsConvertedToFloat32) {
  auto tensors = state();
  for (auto& [name, t] : tensors) t = t.to(torch::kFloat16);
  auto loaded = BertForSequenceClassification::from_pretrained(write_checkpoint("f16", tensors));
  const auto params = loaded->named_parameters();
  const auto& w = params["bert.encoder.layer.0.intermediate.dense.weight"];
  EXPECT_EQ(w.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(w, tensors["bert.encoder.layer.0.intermediate.dense.weight"].to(torch::kFloat32)));
}

TEST_F(BertPretrainedTest, MissingOrCorruptWeightsFileIsAClearError) {
  const fs::path dir = write_checkpoint("corrupt", state());
  {
    std::ofstream truncate(dir / "model.safetensors", std::ios::binary | std::ios::trunc);
    truncate << "\x10\x00\x00";
  }
  std::string what = expect_throw<StorageError>(dir);
  EXPECT_NE(what.find("cannot load " + (dir / "model.safetensors").string()), std::string::npos) << what;
  fs::remove(dir / "model.safetensors");
  what = expect_throw<StorageError>(dir);
  EXPECT_NE(what.find("model.safetensors: missing"), std::string::npos) << what;
  fs::remove(dir / "config.json");
  what = expect_throw<ConfigError>(dir);
  EXPECT_NE(what.find("config.json: cannot open"), std::string::npos) << what;
}

TEST_F(BertPretrainedTest, OptionsOverrideLabelsAndProblemType) {
  model_->save_pretrained(root_ / "saved");
  auto loaded = BertForSequenceClassification::from_pretrained(
      root_ / "saved", BertPretrainedOptions()
                           .id2label(Id2Label{{0, "neg"}, {1, "pos"}})
                           .problem_type(ProblemType::kMultiLabelClassification));
  EXPECT_EQ(loaded->config().id2label.at(1), "pos");
  EXPECT_EQ(loaded->config().problem_type, ProblemType::kMultiLabelClassification);
  EXPECT_TRUE(loaded->loading_info().missing_keys.empty());  // same head size: loaded
  EXPECT_THROW(BertForSequenceClassification::from_pretrained(
                   root_ / "saved", BertPretrainedOptions().num_labels(3).id2label(Id2Label{{0, "a"}})),
               ConfigError);
  // A head of another size cannot take the checkpoint's classifier.
  const std::string what = [&] {
    try {
      BertForSequenceClassification::from_pretrained(root_ / "saved", BertPretrainedOptions().num_labels(5));
    } catch (const ConfigError& e) {  // the wrong file for the model asked for: exit 2, not retried
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(what.find("tensor 'classifier.bias' has shape [2] but parameter classifier.bias"), std::string::npos)
      << what;
}

TEST_F(BertPretrainedTest, SaveReplacesAModelDirectoryWholeAndLeavesNoTemporaries) {
  const fs::path dir = root_ / "out";
  model_->save_pretrained(dir);
  const std::string first = files::read_all(dir / "model.safetensors");
  auto other = std::make_shared<BertForSequenceClassification>(tiny_config());
  other->save_pretrained(dir.string() + "/");  // a trailing slash names the same directory
  EXPECT_NE(files::read_all(dir / "model.safetensors"), first);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root_)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"out"});
  names.clear();
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"config.json", "model.safetensors"}));
}

TEST_F(BertPretrainedTest, SaveRefusesADirectoryHoldingOtherFiles) {
  const fs::path dir = root_ / "output_dir";
  fs::create_directories(dir / "checkpoints");
  try {
    model_->save_pretrained(dir);
    ADD_FAILURE() << "saved over a directory with checkpoints";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("holds 'checkpoints'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(dir / "checkpoints"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
}

TEST_F(BertPretrainedTest, ForwardRejectsBadShapes) {
  const auto ids = torch::zeros({2, 4}, torch::kInt64);
  EXPECT_THROW(model_->forward(ids, torch::ones({2, 3}, torch::kInt64), {}), ConfigError);
  EXPECT_THROW(model_->forward(torch::zeros({2, 17}, torch::kInt64), {}, {}), ConfigError);
  EXPECT_THROW(model_->forward(torch::zeros({4}, torch::kInt64), {}, {}), ConfigError);
}

}  // namespace
}  // namespace tenax::sdk
