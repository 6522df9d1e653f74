#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "sdk/models/minilm_fixture.h"
#include "tenax/core/error.h"
#include "tenax/sdk/models/bert_config.h"

namespace tenax::sdk {
namespace {

using nlohmann::json;

json tiny() {
  return json{{"model_type", "bert"},
              {"vocab_size", 50},
              {"hidden_size", 8},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 2},
              {"intermediate_size", 16},
              {"max_position_embeddings", 16},
              {"type_vocab_size", 2},
              {"hidden_act", "gelu"},
              {"position_embedding_type", "absolute"}};
}

// Parsing `j` must throw a ConfigError whose message names the source and contains `needle`.
void expect_error(const json& j, const std::string& needle) {
  try {
    BertConfig::from_json_string(j.dump(), "some/dir/config.json");
    ADD_FAILURE() << "accepted " << j.dump();
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("some/dir/config.json"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

TEST(BertConfig, ParsesTheMiniLmConfig) {
  const BertConfig c = BertConfig::from_json_file(test::minilm_dir() / "config.json");
  EXPECT_EQ(c.vocab_size, 30522);
  EXPECT_EQ(c.hidden_size, 384);
  EXPECT_EQ(c.num_hidden_layers, 6);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-12);
  EXPECT_EQ(c.num_labels(), 2);  // transformers' default
  EXPECT_FALSE(c.problem_type.has_value());
  EXPECT_FALSE(c.classifier_dropout.has_value());
  EXPECT_DOUBLE_EQ(c.effective_classifier_dropout(), 0.1);
}

TEST(BertConfig, MissingArchitectureKeyIsNamed) {
  for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                          "max_position_embeddings", "type_vocab_size"}) {
    json j = tiny();
    j.erase(key);
    expect_error(j, std::string("\"") + key + "\": missing");
  }
}

TEST(BertConfig, MistypedOrOutOfRangeValuesAreNamed) {
  json j = tiny();
  j["hidden_size"] = "8";
  expect_error(j, "\"hidden_size\": expected an integer");
  j = tiny();
  j["hidden_dropout_prob"] = "0.1";
  expect_error(j, "\"hidden_dropout_prob\": expected a number");
  j = tiny();
  j["hidden_size"] = 10;
  j["num_attention_heads"] = 3;
  expect_error(j, "\"hidden_size\": 10 is not a multiple of num_attention_heads (3)");
  j = tiny();
  j["attention_probs_dropout_prob"] = 1.5;
  expect_error(j, "\"attention_probs_dropout_prob\": must be in [0, 1)");
  j = tiny();
  j["pad_token_id"] = 50;
  expect_error(j, "\"pad_token_id\": 50 is outside the vocabulary");
  j = tiny();
  j["num_hidden_layers"] = 0;
  expect_error(j, "\"num_hidden_layers\": must be positive");
  j = tiny();
  j["id2label"] = {{"0", "neg"}, {"2", "pos"}};
  expect_error(j, "\"id2label\": class indices must be 0..n-1");
  j = tiny();
  j["problem_type"] = "ranking";
  expect_error(j, "\"problem_type\": \"ranking\" is not one of");
}

TEST(BertConfig, UnsupportedVariantsAreRefusedNotApproximated) {
  json j = tiny();
  j["hidden_act"] = "relu";
  expect_error(j, "\"hidden_act\": \"relu\" is not supported");
  j = tiny();
  j["hidden_act"] = "gelu_new";
  expect_error(j, "\"hidden_act\": \"gelu_new\" is not supported");
  j = tiny();
  j["position_embedding_type"] = "relative_key";
  expect_error(j, "\"position_embedding_type\": \"relative_key\" is not supported");
  j = tiny();
  j["model_type"] = "distilbert";
  expect_error(j, "\"model_type\": \"distilbert\" is not supported");
}

TEST(BertConfig, BadJsonAndMissingFileNameTheFile) {
  try {
    BertConfig::from_json_string("{\"vocab_size\": 5,", "x/config.json");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("x/config.json: not valid JSON"), std::string::npos);
  }
  try {
    BertConfig::from_json_file("/nonexistent/config.json");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/config.json: cannot open"), std::string::npos);
  }
}

TEST(BertConfig, LabelsFollowTransformersRules) {
  json j = tiny();
  j["num_labels"] = 3;
  EXPECT_EQ(BertConfig::from_json_string(j.dump(), "c").id2label,
            (std::map<std::int64_t, std::string>{{0, "LABEL_0"}, {1, "LABEL_1"}, {2, "LABEL_2"}}));
  j["id2label"] = {{"0", "neg"}, {"1", "pos"}};  // id2label wins over num_labels
  BertConfig c = BertConfig::from_json_string(j.dump(), "c");
  EXPECT_EQ(c.num_labels(), 2);
  c.set_num_labels(2);  // same size: names kept
  EXPECT_EQ(c.id2label.at(1), "pos");
  c.set_num_labels(1);
  EXPECT_EQ(c.id2label, (std::map<std::int64_t, std::string>{{0, "LABEL_0"}}));
  EXPECT_THROW(c.set_num_labels(0), ConfigError);
}

TEST(BertConfig, JsonRoundTripKeepsEveryFieldAndWritesTransformersKeys) {
  json j = tiny();
  j["id2label"] = {{"0", "neg"}, {"1", "neutral"}, {"2", "pos"}};
  j["problem_type"] = "single_label_classification";
  j["classifier_dropout"] = 0.25;
  j["layer_norm_eps"] = 1e-7;
  j["pad_token_id"] = 3;
  const BertConfig c = BertConfig::from_json_string(j.dump(), "c");
  const std::string text = c.to_json_string();
  const json written = json::parse(text);
  EXPECT_EQ(written["architectures"], json::array({"BertForSequenceClassification"}));
  EXPECT_EQ(written["model_type"], "bert");
  EXPECT_EQ(written["label2id"], (json{{"neg", 0}, {"neutral", 1}, {"pos", 2}}));
  EXPECT_EQ(written["id2label"]["1"], "neutral");
  EXPECT_EQ(text.back(), '\n');
  const BertConfig back = BertConfig::from_json_string(text, "written");
  EXPECT_EQ(back.id2label, c.id2label);
  EXPECT_EQ(back.problem_type, c.problem_type);
  EXPECT_EQ(back.classifier_dropout, c.classifier_dropout);
  EXPECT_EQ(back.layer_norm_eps, c.layer_norm_eps);
  EXPECT_EQ(back.pad_token_id, 3);
  EXPECT_EQ(back.to_json_string(), text);
}

}  // namespace
}  // namespace tenax::sdk
