#include "models/config_json.h"

#include <fstream>
#include <sstream>

#include "tenax/core/error.h"

namespace tenax::sdk {

const char* problem_type_name(ProblemType type) {
  switch (type) {
    case ProblemType::kRegression: return "regression";
    case ProblemType::kSingleLabelClassification: return "single_label_classification";
    case ProblemType::kMultiLabelClassification: return "multi_label_classification";
  }
  return "unknown";
}

void PretrainedConfig::set_num_labels(std::int64_t n) {
  if (n < 1) throw ConfigError("num_labels must be at least 1, got " + std::to_string(n));
  if (num_labels() == n) return;
  id2label.clear();
  for (std::int64_t i = 0; i < n; ++i) id2label[i] = "LABEL_" + std::to_string(i);
}

void PretrainedConfig::validate_labels(const std::string& where) const {
  if (id2label.empty()) detail::config_error(where, "id2label", "needs at least one label");
  std::int64_t expected = 0;
  for (const auto& entry : id2label) {
    if (entry.first != expected++) detail::config_error(where, "id2label", "class indices must be 0..n-1");
  }
}

namespace detail {
namespace {

using nlohmann::json;

ProblemType parse_problem_type(const ConfigJson& in, const std::string& value) {
  for (ProblemType t :
       {ProblemType::kRegression, ProblemType::kSingleLabelClassification, ProblemType::kMultiLabelClassification}) {
    if (value == problem_type_name(t)) return t;
  }
  in.fail("problem_type", "\"" + value +
                              "\" is not one of regression, single_label_classification, "
                              "multi_label_classification");
}

Id2Label parse_id2label(const ConfigJson& in, const json& value) {
  if (!value.is_object()) in.fail("id2label", "expected an object {\"0\": \"name\", ...}");
  Id2Label out;
  for (auto it = value.begin(); it != value.end(); ++it) {
    std::int64_t id = -1;
    try {
      std::size_t used = 0;
      id = std::stoll(it.key(), &used);
      if (used != it.key().size()) id = -1;
    } catch (const std::exception&) {
      id = -1;
    }
    if (id < 0) in.fail("id2label", "key \"" + it.key() + "\" is not a class index");
    if (!it.value().is_string()) in.fail("id2label", "label of \"" + it.key() + "\" is not a string");
    out[id] = it.value().get<std::string>();
  }
  return out;
}

}  // namespace

void config_error(const std::string& where, const std::string& key, const std::string& what) {
  throw ConfigError(where + ": key \"" + key + "\": " + what);
}

void check_positive(const std::string& where, const char* key, std::int64_t value) {
  if (value <= 0) config_error(where, key, "must be positive, got " + std::to_string(value));
}

void check_probability(const std::string& where, const char* key, double p) {
  if (!(p >= 0.0 && p < 1.0)) config_error(where, key, "must be in [0, 1), got " + std::to_string(p));
}

ConfigJson ConfigJson::from_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(path.string() + ": cannot open (a Hugging Face model directory needs a config.json)");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return from_string(text.str(), path.string());
}

ConfigJson ConfigJson::from_string(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ConfigError(where + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw ConfigError(where + ": expected a JSON object");
  return ConfigJson(std::move(j), where);
}

void ConfigJson::fail(const std::string& key, const std::string& what) const { config_error(where_, key, what); }

const json* ConfigJson::find(const char* key) const {
  auto it = json_.find(key);
  if (it == json_.end() || it->is_null()) return nullptr;
  return &*it;
}

void ConfigJson::expect_model_type(const std::string& expected) const {
  if (auto model_type = read_string("model_type"); model_type && *model_type != expected) {
    fail("model_type", "\"" + *model_type + "\" is not supported (only \"" + expected +
                           "\" here; the family of a model directory is its config.json's model_type)");
  }
}

bool ConfigJson::read_int(const char* key, std::int64_t& out, Presence presence) const {
  const json* value = find(key);
  if (value == nullptr) {
    if (presence == kRequired) fail(key, "missing (this key fixes a tensor shape and has no safe default)");
    return false;
  }
  if (!value->is_number_integer()) fail(key, "expected an integer, got " + value->dump());
  out = value->get<std::int64_t>();
  return true;
}

bool ConfigJson::read_double(const char* key, double& out) const {
  const json* value = find(key);
  if (value == nullptr) return false;
  if (!value->is_number()) fail(key, "expected a number, got " + value->dump());
  out = value->get<double>();
  return true;
}

bool ConfigJson::read_bool(const char* key, bool& out) const {
  const json* value = find(key);
  if (value == nullptr) return false;
  if (!value->is_boolean()) fail(key, "expected true or false, got " + value->dump());
  out = value->get<bool>();
  return true;
}

std::optional<double> ConfigJson::read_optional_double(const char* key) const {
  double out = 0.0;
  if (!read_double(key, out)) return std::nullopt;
  return out;
}

std::optional<std::string> ConfigJson::read_string(const char* key) const {
  const json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) fail(key, "expected a string, got " + value->dump());
  return value->get<std::string>();
}

void ConfigJson::read_labels(PretrainedConfig& config) const {
  if (auto pt = read_string("problem_type")) config.problem_type = parse_problem_type(*this, *pt);
  // transformers: id2label wins; else num_labels; else 2 labels.
  if (const json* id2label = find("id2label")) {
    config.id2label = parse_id2label(*this, *id2label);
  } else {
    std::int64_t n = 2;
    read_int("num_labels", n);
    if (n < 1) fail("num_labels", "must be at least 1");
    config.set_num_labels(n);
  }
}

void write_pretrained_keys(json& j, const PretrainedConfig& config, const std::string& model_type,
                           const std::string& architecture) {
  j["architectures"] = json::array({architecture});
  j["model_type"] = model_type;
  j["problem_type"] = config.problem_type ? json(problem_type_name(*config.problem_type)) : json(nullptr);
  j["torch_dtype"] = "float32";
  json id2label_json = json::object();
  json label2id_json = json::object();
  for (const auto& [id, name] : config.id2label) {
    id2label_json[std::to_string(id)] = name;
    label2id_json[name] = id;
  }
  j["id2label"] = id2label_json;
  j["label2id"] = label2id_json;
}

}  // namespace detail
}  // namespace tenax::sdk
