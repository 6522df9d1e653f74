// Reading and writing config.json for every model family: typed reads that name the file and
// the key in each error, and the keys transformers' PretrainedConfig shares (id2label,
// label2id, num_labels, problem_type). A family's config parser is then a list of reads.
// Private to sdk/. Thread-safety: a plain value.
//
//   ConfigJson json = ConfigJson::from_file(path);
//   json.expect_model_type("distilbert");
//   json.read_int("dim", c.dim, ConfigJson::kRequired);
//   json.read_labels(c);
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tenax/sdk/models/pretrained_config.h"

namespace tenax::sdk::detail {

class ConfigJson {
 public:
  /// Whether a key must be present: architecture keys fix tensor shapes and have no safe default.
  enum Presence { kOptional, kRequired };

  /// Throws ConfigError naming `path` when it cannot be read or is not a JSON object.
  static ConfigJson from_file(const std::filesystem::path& path);
  /// As from_file, on text already read; `where` names the source in errors.
  static ConfigJson from_string(const std::string& text, const std::string& where);

  const std::string& where() const { return where_; }
  const nlohmann::json& document() const { return json_; }

  /// Refuses a config.json whose model_type is set and is not `expected`.
  void expect_model_type(const std::string& expected) const;

  /// Reads `key` into `out` when present (JSON null counts as absent: transformers writes
  /// nulls); returns whether it was. Throws ConfigError for a mistyped value or a missing
  /// required key.
  bool read_int(const char* key, std::int64_t& out, Presence presence = kOptional) const;
  bool read_double(const char* key, double& out) const;
  bool read_bool(const char* key, bool& out) const;
  std::optional<double> read_optional_double(const char* key) const;
  std::optional<std::string> read_string(const char* key) const;

  /// id2label (wins), else num_labels, else transformers' 2 labels; and problem_type.
  void read_labels(PretrainedConfig& config) const;

  /// Throws ConfigError "<where>: key "<key>": <what>".
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

 private:
  ConfigJson(nlohmann::json json, std::string where) : json_(std::move(json)), where_(std::move(where)) {}
  const nlohmann::json* find(const char* key) const;

  nlohmann::json json_;
  std::string where_;
};

/// Throws ConfigError "<where>: key "<key>": <what>" (for validate() of every family).
[[noreturn]] void config_error(const std::string& where, const std::string& key, const std::string& what);

/// validate() helpers: a size must be positive; a dropout probability must be in [0, 1).
void check_positive(const std::string& where, const char* key, std::int64_t value);
void check_probability(const std::string& where, const char* key, double p);

/// The shared keys transformers writes: id2label (string keys), label2id, problem_type (null when
/// undecided), torch_dtype "float32", architectures [architecture], model_type.
void write_pretrained_keys(nlohmann::json& j, const PretrainedConfig& config, const std::string& model_type,
                           const std::string& architecture);

}  // namespace tenax::sdk::detail
