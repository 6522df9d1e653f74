// BertTokenizerConfig::from_directory: what a Hugging Face model directory says about its
// tokenizer. tokenizer.json wins over tokenizer_config.json because it is what
// BertTokenizerFast (and so the goldens) actually runs.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tenax/core/error.h"
#include "tenax/sdk/text/bert_tokenizer.h"

namespace tenax::sdk {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot open " + path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw ConfigError(path.string() + ": not valid JSON: " + e.what());
  }
}

[[noreturn]] void bad(const fs::path& file, const std::string& key, const std::string& why) {
  throw ConfigError(file.string() + ": key '" + key + "' " + why);
}

bool get_bool(const json& j, const char* key, bool fallback, const fs::path& file) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) bad(file, key, "must be true or false");
  return j[key].get<bool>();
}

std::optional<bool> get_optional_bool(const json& j, const char* key, const fs::path& file) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_boolean()) bad(file, key, "must be true, false or null");
  return j[key].get<bool>();
}

// Special tokens appear as "[UNK]" or, in newer files, as {"content": "[UNK]", ...}.
void get_token(const json& j, const char* key, std::string& out, const fs::path& file) {
  if (!j.contains(key) || j[key].is_null()) return;
  const json& v = j[key];
  if (v.is_string()) {
    out = v.get<std::string>();
  } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    out = v["content"].get<std::string>();
  } else {
    bad(file, key, "must be a string or an object with a string 'content'");
  }
}

void apply_tokenizer_config(const fs::path& file, BertTokenizerConfig& c) {
  const json j = read_json(file);
  if (!j.is_object()) throw ConfigError(file.string() + ": expected a JSON object");
  c.lowercase = get_bool(j, "do_lower_case", c.lowercase, file);
  c.strip_accents = get_optional_bool(j, "strip_accents", file);
  c.handle_chinese_chars = get_bool(j, "tokenize_chinese_chars", c.handle_chinese_chars, file);
  get_token(j, "unk_token", c.unk_token, file);
  get_token(j, "cls_token", c.cls_token, file);
  get_token(j, "sep_token", c.sep_token, file);
  get_token(j, "pad_token", c.pad_token, file);
  get_token(j, "mask_token", c.mask_token, file);
  if (j.contains("model_max_length") && j["model_max_length"].is_number_integer()) {
    const auto n = j["model_max_length"].get<std::int64_t>();
    // HF writes a huge sentinel (int(1e30)) when the length is unknown; keep the default then.
    if (n > 0 && n <= (std::int64_t{1} << 31)) c.model_max_length = n;
  }
}

void apply_tokenizer_json(const fs::path& file, BertTokenizerConfig& c) {
  const json j = read_json(file);
  if (!j.is_object()) throw ConfigError(file.string() + ": expected a JSON object");
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    const json& n = j["normalizer"];
    if (n.value("type", "") != "BertNormalizer") {
      bad(file, "normalizer.type", "is '" + n.value("type", "") + "'; BertTokenizer implements only BertNormalizer");
    }
    c.clean_text = get_bool(n, "clean_text", c.clean_text, file);
    c.handle_chinese_chars = get_bool(n, "handle_chinese_chars", c.handle_chinese_chars, file);
    c.strip_accents = get_optional_bool(n, "strip_accents", file);
    c.lowercase = get_bool(n, "lowercase", c.lowercase, file);
  }
  if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null() &&
      j["pre_tokenizer"].value("type", "") != "BertPreTokenizer") {
    bad(file, "pre_tokenizer.type", "is not BertPreTokenizer, which BertTokenizer implements");
  }
  if (j.contains("model") && j["model"].is_object()) {
    const json& m = j["model"];
    if (m.value("type", "WordPiece") != "WordPiece") {
      bad(file, "model.type", "is '" + m.value("type", "") + "'; expected WordPiece");
    }
    get_token(m, "unk_token", c.unk_token, file);
    if (m.contains("continuing_subword_prefix") && m["continuing_subword_prefix"].is_string()) {
      c.continuing_subword_prefix = m["continuing_subword_prefix"].get<std::string>();
    }
    if (m.contains("max_input_chars_per_word")) {
      if (!m["max_input_chars_per_word"].is_number_unsigned()) {
        bad(file, "model.max_input_chars_per_word", "must be a non-negative integer");
      }
      c.max_input_chars_per_word = m["max_input_chars_per_word"].get<std::size_t>();
    }
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    c.special_tokens.clear();
    for (const json& t : j["added_tokens"]) {
      const std::string content = t.value("content", "");
      if (content.empty()) bad(file, "added_tokens", "holds a token without content");
      // Only the plain form is implemented: matched literally in the raw text.
      for (const char* flag : {"normalized", "lstrip", "rstrip", "single_word"}) {
        if (t.value(flag, false)) {
          bad(file, "added_tokens[" + content + "]." + flag,
              "is true; BertTokenizer matches added tokens only literally (all four false)");
        }
      }
      c.special_tokens.push_back(content);
    }
  }
}

}  // namespace

BertTokenizerConfig BertTokenizerConfig::from_directory(const std::string& dir) {
  BertTokenizerConfig config;
  const fs::path base(dir);
  if (!fs::is_directory(base)) {
    throw ConfigError("BertTokenizerConfig: " + dir +
                      " is not a directory (a Hugging Face model "
                      "directory with vocab.txt; run tools/fetch_assets.sh?)");
  }
  const fs::path tokenizer_config = base / "tokenizer_config.json";
  const fs::path tokenizer_json = base / "tokenizer.json";
  if (fs::exists(tokenizer_config)) apply_tokenizer_config(tokenizer_config, config);
  if (fs::exists(tokenizer_json)) apply_tokenizer_json(tokenizer_json, config);
  return config;
}

}  // namespace tenax::sdk
