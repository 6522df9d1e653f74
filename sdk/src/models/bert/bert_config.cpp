#include "tenax/sdk/models/bert_config.h"

#include <nlohmann/json.hpp>

#include "models/config_json.h"
#include "tenax/core/error.h"

namespace tenax::sdk {

using detail::check_positive;
using detail::check_probability;
using detail::config_error;

void BertConfig::validate(const std::string& where) const {
  check_positive(where, "vocab_size", vocab_size);
  check_positive(where, "hidden_size", hidden_size);
  check_positive(where, "num_hidden_layers", num_hidden_layers);
  check_positive(where, "num_attention_heads", num_attention_heads);
  check_positive(where, "intermediate_size", intermediate_size);
  check_positive(where, "max_position_embeddings", max_position_embeddings);
  check_positive(where, "type_vocab_size", type_vocab_size);
  if (hidden_size % num_attention_heads != 0) {
    config_error(where, "hidden_size",
                 std::to_string(hidden_size) + " is not a multiple of num_attention_heads (" +
                     std::to_string(num_attention_heads) + ")");
  }
  check_probability(where, "hidden_dropout_prob", hidden_dropout_prob);
  check_probability(where, "attention_probs_dropout_prob", attention_probs_dropout_prob);
  if (classifier_dropout) check_probability(where, "classifier_dropout", *classifier_dropout);
  if (!(initializer_range > 0.0)) config_error(where, "initializer_range", "must be positive");
  if (!(layer_norm_eps > 0.0)) config_error(where, "layer_norm_eps", "must be positive");
  if (pad_token_id < 0 || pad_token_id >= vocab_size) {
    config_error(where, "pad_token_id",
                 std::to_string(pad_token_id) + " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
  }
  validate_labels(where);
}

namespace {

BertConfig parse(const detail::ConfigJson& in) {
  using detail::ConfigJson;
  in.expect_model_type("bert");
  BertConfig c;
  in.read_int("vocab_size", c.vocab_size, ConfigJson::kRequired);
  in.read_int("hidden_size", c.hidden_size, ConfigJson::kRequired);
  in.read_int("num_hidden_layers", c.num_hidden_layers, ConfigJson::kRequired);
  in.read_int("num_attention_heads", c.num_attention_heads, ConfigJson::kRequired);
  in.read_int("intermediate_size", c.intermediate_size, ConfigJson::kRequired);
  in.read_int("max_position_embeddings", c.max_position_embeddings, ConfigJson::kRequired);
  in.read_int("type_vocab_size", c.type_vocab_size, ConfigJson::kRequired);
  in.read_int("pad_token_id", c.pad_token_id);
  in.read_double("hidden_dropout_prob", c.hidden_dropout_prob);
  in.read_double("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  in.read_double("initializer_range", c.initializer_range);
  in.read_double("layer_norm_eps", c.layer_norm_eps);
  c.classifier_dropout = in.read_optional_double("classifier_dropout");
  if (auto act = in.read_string("hidden_act"); act && *act != "gelu") {
    in.fail("hidden_act", "\"" + *act + "\" is not supported: Tenax's BERT computes only \"gelu\" (exact, erf)");
  }
  if (auto pos = in.read_string("position_embedding_type"); pos && *pos != "absolute") {
    in.fail("position_embedding_type",
            "\"" + *pos + "\" is not supported: Tenax's BERT has only \"absolute\" positions");
  }
  in.read_labels(c);
  c.validate(in.where());
  return c;
}

}  // namespace

BertConfig BertConfig::from_json_file(const std::filesystem::path& path) {
  return parse(detail::ConfigJson::from_file(path));
}

BertConfig BertConfig::from_json_string(const std::string& text, const std::string& where) {
  return parse(detail::ConfigJson::from_string(text, where));
}

std::string BertConfig::to_json_string() const {
  nlohmann::json j;  // nlohmann's object is a std::map: keys come out sorted, as transformers sorts them
  detail::write_pretrained_keys(j, *this, "bert", "BertForSequenceClassification");
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["intermediate_size"] = intermediate_size;
  j["hidden_act"] = "gelu";
  j["hidden_dropout_prob"] = hidden_dropout_prob;
  j["attention_probs_dropout_prob"] = attention_probs_dropout_prob;
  j["max_position_embeddings"] = max_position_embeddings;
  j["type_vocab_size"] = type_vocab_size;
  j["initializer_range"] = initializer_range;
  j["layer_norm_eps"] = layer_norm_eps;
  j["pad_token_id"] = pad_token_id;
  j["position_embedding_type"] = "absolute";
  j["classifier_dropout"] = classifier_dropout ? nlohmann::json(*classifier_dropout) : nlohmann::json(nullptr);
  return j.dump(2) + "\n";
}

}  // namespace tenax::sdk
