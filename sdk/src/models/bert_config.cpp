#include "tenax/sdk/models/bert_config.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& key, const std::string& what) {
  throw ConfigError(where + ": key \"" + key + "\": " + what);
}

// Reads an optional key into `out`; JSON null counts as absent (transformers writes nulls).
// Returns whether the key was present.
bool read_int(const json& j, const std::string& where, const char* key, std::int64_t& out,
              bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required)
      fail(where, key, "missing (this key fixes a tensor shape and has no safe default)");
    return false;
  }
  if (!it->is_number_integer()) fail(where, key, "expected an integer, got " + it->dump());
  out = it->get<std::int64_t>();
  return true;
}

void read_double(const json& j, const std::string& where, const char* key, double& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_number()) fail(where, key, "expected a number, got " + it->dump());
  out = it->get<double>();
}

std::optional<std::string> read_string(const json& j, const std::string& where, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) fail(where, key, "expected a string, got " + it->dump());
  return it->get<std::string>();
}

ProblemType parse_problem_type(const std::string& where, const std::string& value) {
  for (ProblemType t : {ProblemType::kRegression, ProblemType::kSingleLabelClassification,
                        ProblemType::kMultiLabelClassification}) {
    if (value == problem_type_name(t)) return t;
  }
  fail(where, "problem_type",
       "\"" + value +
           "\" is not one of regression, single_label_classification, "
           "multi_label_classification");
}

std::map<std::int64_t, std::string> parse_id2label(const json& value, const std::string& where) {
  if (!value.is_object()) fail(where, "id2label", "expected an object {\"0\": \"name\", ...}");
  std::map<std::int64_t, std::string> out;
  for (auto it = value.begin(); it != value.end(); ++it) {
    std::int64_t id = -1;
    try {
      std::size_t used = 0;
      id = std::stoll(it.key(), &used);
      if (used != it.key().size()) id = -1;
    } catch (const std::exception&) {
      id = -1;
    }
    if (id < 0) fail(where, "id2label", "key \"" + it.key() + "\" is not a class index");
    if (!it.value().is_string())
      fail(where, "id2label", "label of \"" + it.key() + "\" is not a string");
    out[id] = it.value().get<std::string>();
  }
  return out;
}

}  // namespace

const char* problem_type_name(ProblemType type) {
  switch (type) {
    case ProblemType::kRegression: return "regression";
    case ProblemType::kSingleLabelClassification: return "single_label_classification";
    case ProblemType::kMultiLabelClassification: return "multi_label_classification";
  }
  return "unknown";
}

void BertConfig::set_num_labels(std::int64_t n) {
  if (n < 1) throw ConfigError("num_labels must be at least 1, got " + std::to_string(n));
  if (num_labels() == n) return;
  id2label.clear();
  for (std::int64_t i = 0; i < n; ++i) id2label[i] = "LABEL_" + std::to_string(i);
}

void BertConfig::validate(const std::string& where) const {
  auto positive = [&](const char* key, std::int64_t v) {
    if (v <= 0) fail(where, key, "must be positive, got " + std::to_string(v));
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("intermediate_size", intermediate_size);
  positive("max_position_embeddings", max_position_embeddings);
  positive("type_vocab_size", type_vocab_size);
  if (hidden_size % num_attention_heads != 0) {
    fail(where, "hidden_size",
         std::to_string(hidden_size) + " is not a multiple of num_attention_heads (" +
             std::to_string(num_attention_heads) + ")");
  }
  auto probability = [&](const char* key, double p) {
    if (!(p >= 0.0 && p < 1.0)) fail(where, key, "must be in [0, 1), got " + std::to_string(p));
  };
  probability("hidden_dropout_prob", hidden_dropout_prob);
  probability("attention_probs_dropout_prob", attention_probs_dropout_prob);
  if (classifier_dropout) probability("classifier_dropout", *classifier_dropout);
  if (!(initializer_range > 0.0)) fail(where, "initializer_range", "must be positive");
  if (!(layer_norm_eps > 0.0)) fail(where, "layer_norm_eps", "must be positive");
  if (pad_token_id < 0 || pad_token_id >= vocab_size) {
    fail(where, "pad_token_id",
         std::to_string(pad_token_id) + " is outside the vocabulary [0, " +
             std::to_string(vocab_size) + ")");
  }
  if (id2label.empty()) fail(where, "id2label", "needs at least one label");
  std::int64_t expected = 0;
  for (const auto& [id, name] : id2label) {
    if (id != expected++) fail(where, "id2label", "class indices must be 0..n-1");
  }
}

BertConfig BertConfig::from_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(path.string() +
                      ": cannot open (a Hugging Face model directory needs a config.json)");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return from_json_string(text.str(), path.string());
}

BertConfig BertConfig::from_json_string(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ConfigError(where + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw ConfigError(where + ": expected a JSON object");

  if (auto model_type = read_string(j, where, "model_type"); model_type && *model_type != "bert") {
    fail(where, "model_type", "\"" + *model_type + "\" is not supported (only \"bert\")");
  }

  BertConfig c;
  read_int(j, where, "vocab_size", c.vocab_size, true);
  read_int(j, where, "hidden_size", c.hidden_size, true);
  read_int(j, where, "num_hidden_layers", c.num_hidden_layers, true);
  read_int(j, where, "num_attention_heads", c.num_attention_heads, true);
  read_int(j, where, "intermediate_size", c.intermediate_size, true);
  read_int(j, where, "max_position_embeddings", c.max_position_embeddings, true);
  read_int(j, where, "type_vocab_size", c.type_vocab_size, true);
  read_int(j, where, "pad_token_id", c.pad_token_id, false);
  read_double(j, where, "hidden_dropout_prob", c.hidden_dropout_prob);
  read_double(j, where, "attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  read_double(j, where, "initializer_range", c.initializer_range);
  read_double(j, where, "layer_norm_eps", c.layer_norm_eps);
  if (j.contains("classifier_dropout") && !j["classifier_dropout"].is_null()) {
    double p = 0.0;
    read_double(j, where, "classifier_dropout", p);
    c.classifier_dropout = p;
  }

  if (auto act = read_string(j, where, "hidden_act"); act && *act != "gelu") {
    fail(where, "hidden_act",
         "\"" + *act + "\" is not supported: Tenax's BERT computes only \"gelu\" (exact, erf)");
  }
  if (auto pos = read_string(j, where, "position_embedding_type"); pos && *pos != "absolute") {
    fail(where, "position_embedding_type",
         "\"" + *pos + "\" is not supported: Tenax's BERT has only \"absolute\" positions");
  }
  if (auto pt = read_string(j, where, "problem_type"))
    c.problem_type = parse_problem_type(where, *pt);

  // transformers: id2label wins; else num_labels; else 2 labels.
  if (j.contains("id2label") && !j["id2label"].is_null()) {
    c.id2label = parse_id2label(j["id2label"], where);
  } else {
    std::int64_t n = 2;
    read_int(j, where, "num_labels", n, false);
    if (n < 1) fail(where, "num_labels", "must be at least 1");
    c.set_num_labels(n);
  }
  c.validate(where);
  return c;
}

std::string BertConfig::to_json_string() const {
  json j;  // nlohmann's object is a std::map: keys come out sorted, as transformers sorts them
  j["architectures"] = json::array({"BertForSequenceClassification"});
  j["model_type"] = "bert";
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
  j["classifier_dropout"] = classifier_dropout ? json(*classifier_dropout) : json(nullptr);
  j["problem_type"] = problem_type ? json(problem_type_name(*problem_type)) : json(nullptr);
  j["torch_dtype"] = "float32";
  json id2label_json = json::object();
  json label2id_json = json::object();
  for (const auto& [id, name] : id2label) {
    id2label_json[std::to_string(id)] = name;
    label2id_json[name] = id;
  }
  j["id2label"] = id2label_json;
  j["label2id"] = label2id_json;
  return j.dump(2) + "\n";
}

}  // namespace tenax::sdk
