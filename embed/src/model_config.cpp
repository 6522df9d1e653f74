#include "model_config.h"

#include <cctype>
#include <fstream>
#include <sstream>
#include <string_view>

#include <toml++/toml.h>

#include "tenax/core/error.h"

namespace tenax::capi {
namespace {

const char* const kKnownKeys = "type, widths, activation, loss, path, num_labels";

std::string where(const std::string& source, const toml::source_region& region) {
  return region.begin.line > 0 ? source + ":" + std::to_string(region.begin.line) : source;
}

tenax_loss loss_from_name(const std::string& name, const std::string& where_key) {
  if (name == "mse") return TENAX_LOSS_MSE;
  if (name == "cross_entropy") return TENAX_LOSS_CROSS_ENTROPY;
  throw ConfigError(where_key + ": loss '" + name + "' is not \"mse\" or \"cross_entropy\"");
}

std::int64_t integer_from_string(const std::string& text, const std::string& where_key) {
  std::size_t used = 0;
  std::int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) throw ConfigError(where_key + ": '" + text + "' is not an integer");
  return value;
}

void set_from_node(ModelSpec& spec, const std::string& key, const toml::node& node, const std::string& at) {
  const std::string where_key = at + ": [model] " + key;
  const auto need_string = [&]() -> std::string {
    if (!node.is_string()) throw ConfigError(where_key + " must be a string");
    return node.as_string()->get();
  };
  if (key == "type") {
    spec.type = need_string();
  } else if (key == "activation") {
    spec.activation = need_string();
  } else if (key == "path") {
    spec.path = need_string();
  } else if (key == "loss") {
    spec.loss = loss_from_name(need_string(), where_key);
  } else if (key == "num_labels") {
    if (!node.is_integer()) throw ConfigError(where_key + " must be an integer");
    spec.num_labels = node.as_integer()->get();
  } else if (key == "widths") {
    const toml::array* array = node.as_array();
    if (array == nullptr) throw ConfigError(where_key + " must be an array of integers ([2, 64, 1])");
    spec.widths.clear();
    for (const toml::node& width : *array) {
      if (!width.is_integer()) throw ConfigError(where_key + " must be an array of integers ([2, 64, 1])");
      spec.widths.push_back(width.as_integer()->get());
    }
  } else {
    throw ConfigError(where_key + ": unknown key (known: " + kKnownKeys + ")");
  }
}

void set_from_override(ModelSpec& spec, const std::string& override_text, std::size_t index) {
  const std::string where_key = "overrides[" + std::to_string(index) + "] '" + override_text + "'";
  const auto eq = override_text.find('=');
  if (eq == std::string::npos || eq == 0) throw ConfigError(where_key + ": not key=value");
  const std::string key = override_text.substr(0, eq);
  const std::string value = override_text.substr(eq + 1);
  if (key == "type") {
    spec.type = value;
  } else if (key == "activation") {
    spec.activation = value;
  } else if (key == "path") {
    spec.path = value;
  } else if (key == "loss") {
    spec.loss = loss_from_name(value, where_key);
  } else if (key == "num_labels") {
    spec.num_labels = integer_from_string(value, where_key);
  } else if (key == "widths") {
    spec.widths.clear();
    std::stringstream items(value);
    for (std::string item; std::getline(items, item, ',');) spec.widths.push_back(integer_from_string(item, where_key));
  } else {
    throw ConfigError(where_key + ": unknown key '" + key + "' (known: " + kKnownKeys + ")");
  }
}

}  // namespace

ModelSpec read_model_spec(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  ModelSpec spec;
  if (!file.empty()) {
    const std::string source = file.string();
    toml::table root;
    try {
      root = toml::parse_file(source);
    } catch (const toml::parse_error& e) {
      throw ConfigError(where(source, e.source()) +
                        ": not valid TOML (or unreadable): " + std::string(e.description()));
    }
    if (const toml::node* model = root.get("model")) {
      const toml::table* table = model->as_table();
      if (table == nullptr) throw ConfigError(where(source, model->source()) + ": 'model' must be a table ([model])");
      for (auto&& [name, node] : *table) {
        set_from_node(spec, std::string(name.str()), node,
                      where(source, node.source().begin.line > 0 ? node.source() : name.source()));
      }
    } else if (overrides.empty()) {
      throw ConfigError(source + ": no [model] table (type = \"mlp\", \"torchscript\" or \"bert\")");
    }
  }
  for (std::size_t i = 0; i < overrides.size(); ++i) set_from_override(spec, overrides[i], i);
  if (spec.type.empty()) {
    throw ConfigError((file.empty() ? std::string("overrides") : file.string()) +
                      ": [model] type is missing (\"mlp\", \"torchscript\" or \"bert\")");
  }
  return spec;
}

namespace {

std::string_view lstrip(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// "[model]" with blanks anywhere and an optional trailing comment. (Hand-written rather than
// std::regex: GCC 12's <regex> trips -Wmaybe-uninitialized under -O1 sanitizer builds.)
bool is_model_header(std::string_view line) {
  line = lstrip(line);
  if (line.substr(0, 1) != "[" || line.substr(0, 2) == "[[") return false;
  line = lstrip(line.substr(1));
  if (line.substr(0, 5) != "model") return false;
  line = lstrip(line.substr(5));
  if (line.substr(0, 1) != "]") return false;
  line = lstrip(line.substr(1));
  return line.empty() || line.front() == '#' || line.front() == '\r';
}

// Any table header ([a], [[a]], ["a"]); a nested array's line starts with a value after its '[',
// not with a key.
bool is_table_header(std::string_view line) {
  line = lstrip(line);
  if (line.substr(0, 1) != "[") return false;
  line.remove_prefix(line.substr(0, 2) == "[[" ? 2 : 1);
  line = lstrip(line);
  if (line.empty()) return false;
  const char c = line.front();
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '"' || c == '\'';
}

}  // namespace

std::string without_model_table(const std::string& text) {
  std::stringstream in(text);
  std::string out;
  bool in_model = false;
  for (std::string line; std::getline(in, line);) {
    if (is_model_header(line)) {
      in_model = true;
    } else if (in_model && is_table_header(line)) {
      in_model = false;
    }
    out += (in_model ? std::string() : line) + "\n";
  }
  return out;
}

}  // namespace tenax::capi
