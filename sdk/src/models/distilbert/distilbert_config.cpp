#include "tenax/sdk/models/distilbert_config.h"

#include <nlohmann/json.hpp>

#include "models/config_json.h"

namespace tenax::sdk {
namespace {

using detail::check_positive;
using detail::check_probability;
using detail::config_error;
using detail::ConfigJson;

const char* activation_name(DistilBertActivation a) { return a == DistilBertActivation::kRelu ? "relu" : "gelu"; }

DistilBertConfig parse(const ConfigJson& in) {
  in.expect_model_type("distilbert");
  DistilBertConfig c;
  in.read_int("vocab_size", c.vocab_size, ConfigJson::kRequired);
  in.read_int("dim", c.dim, ConfigJson::kRequired);
  in.read_int("n_layers", c.n_layers, ConfigJson::kRequired);
  in.read_int("n_heads", c.n_heads, ConfigJson::kRequired);
  in.read_int("hidden_dim", c.hidden_dim, ConfigJson::kRequired);
  in.read_int("max_position_embeddings", c.max_position_embeddings, ConfigJson::kRequired);
  in.read_int("pad_token_id", c.pad_token_id);
  in.read_bool("sinusoidal_pos_embds", c.sinusoidal_pos_embds);
  in.read_double("dropout", c.dropout);
  in.read_double("attention_dropout", c.attention_dropout);
  in.read_double("initializer_range", c.initializer_range);
  in.read_double("qa_dropout", c.qa_dropout);
  in.read_double("seq_classif_dropout", c.seq_classif_dropout);
  if (auto act = in.read_string("activation")) {
    if (*act == "gelu") {
      c.activation = DistilBertActivation::kGelu;
    } else if (*act == "relu") {
      c.activation = DistilBertActivation::kRelu;
    } else {
      in.fail("activation",
              "\"" + *act + "\" is not supported: Tenax's DistilBERT computes \"gelu\" (exact, erf) or \"relu\"");
    }
  }
  in.read_labels(c);
  c.validate(in.where());
  return c;
}

}  // namespace

void DistilBertConfig::validate(const std::string& where) const {
  check_positive(where, "vocab_size", vocab_size);
  check_positive(where, "dim", dim);
  check_positive(where, "n_layers", n_layers);
  check_positive(where, "n_heads", n_heads);
  check_positive(where, "hidden_dim", hidden_dim);
  check_positive(where, "max_position_embeddings", max_position_embeddings);
  if (dim % n_heads != 0) {
    config_error(where, "dim", std::to_string(dim) + " is not a multiple of n_heads (" + std::to_string(n_heads) + ")");
  }
  check_probability(where, "dropout", dropout);
  check_probability(where, "attention_dropout", attention_dropout);
  check_probability(where, "qa_dropout", qa_dropout);
  check_probability(where, "seq_classif_dropout", seq_classif_dropout);
  if (!(initializer_range > 0.0)) config_error(where, "initializer_range", "must be positive");
  if (pad_token_id < 0 || pad_token_id >= vocab_size) {
    config_error(where, "pad_token_id",
                 std::to_string(pad_token_id) + " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
  }
  validate_labels(where);
}

DistilBertConfig DistilBertConfig::from_json_file(const std::filesystem::path& path) {
  return parse(ConfigJson::from_file(path));
}

DistilBertConfig DistilBertConfig::from_json_string(const std::string& text, const std::string& where) {
  return parse(ConfigJson::from_string(text, where));
}

std::string DistilBertConfig::to_json_string() const {
  nlohmann::json j;  // keys come out sorted, as transformers sorts them
  detail::write_pretrained_keys(j, *this, "distilbert", "DistilBertForSequenceClassification");
  j["vocab_size"] = vocab_size;
  j["max_position_embeddings"] = max_position_embeddings;
  j["sinusoidal_pos_embds"] = sinusoidal_pos_embds;
  j["n_layers"] = n_layers;
  j["n_heads"] = n_heads;
  j["dim"] = dim;
  j["hidden_dim"] = hidden_dim;
  j["dropout"] = dropout;
  j["attention_dropout"] = attention_dropout;
  j["activation"] = activation_name(activation);
  j["initializer_range"] = initializer_range;
  j["qa_dropout"] = qa_dropout;
  j["seq_classif_dropout"] = seq_classif_dropout;
  j["pad_token_id"] = pad_token_id;
  return j.dump(2) + "\n";
}

}  // namespace tenax::sdk
