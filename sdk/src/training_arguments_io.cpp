#include "tenax/sdk/training_arguments_io.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "hf_field_table.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"

namespace tenax::sdk {
namespace {

template <typename... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <typename... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

// The expected type of a field, in the words of the error messages and of --help.
std::string type_name(const FieldTarget& target) {
  return std::visit(
      Overloaded{[](std::string*) { return "string"; }, [](double*) { return "number"; },
                 [](std::int64_t*) { return "integer"; }, [](std::uint64_t*) { return "non-negative integer"; },
                 [](bool*) { return "boolean"; }, [](std::optional<bool>*) { return "boolean"; },
                 [](std::vector<std::string>*) { return "list of strings"; }, [](ChoiceBase*) { return "string"; }},
      target);
}

std::string a_type(const FieldTarget& target) {
  const std::string name = type_name(target);
  return (name[0] == 'i' ? "an " : "a ") + name;
}

std::string toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

// An optional field left unset (transformers' None): TOML has no way to write it.
bool is_unset(const FieldTarget& target) {
  const auto* optional = std::get_if<std::optional<bool>*>(&target);
  return optional != nullptr && !(*optional)->has_value();
}

// A value as written in TOML (and close to how Python prints it). JSON's string escapes and
// arrays of strings are valid TOML. An unset optional is "unset" (to_toml comments it out).
std::string toml_value(const FieldTarget& target) {
  return std::visit(Overloaded{[](std::string* v) { return nlohmann::json(*v).dump(); },
                               [](double* v) -> std::string {
                                 if (std::isnan(*v)) return "nan";
                                 if (std::isinf(*v)) return *v > 0 ? "inf" : "-inf";
                                 return nlohmann::json(*v).dump();  // shortest round trip; "1.0", "5e-05"
                               },
                               [](std::int64_t* v) { return std::to_string(*v); },
                               [](std::uint64_t* v) { return std::to_string(*v); },
                               [](bool* v) -> std::string { return *v ? "true" : "false"; },
                               [](std::optional<bool>* v) -> std::string {
                                 return !v->has_value() ? "unset" : **v ? "true" : "false";
                               },
                               [](std::vector<std::string>* v) { return nlohmann::json(*v).dump(); },
                               [](ChoiceBase* v) { return nlohmann::json(v->name()).dump(); }},
                    target);
}

std::string at(const std::string& source, const toml::source_region& region) {
  return source + ":" + std::to_string(region.begin.line) + ": ";
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& known, const std::string& prefix) {
  const std::string best = closest_name(name, known);
  return best.empty() ? std::string() : " (did you mean '" + prefix + best + "'?)";
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The spellings transformers' HfArgumentParser takes (its string_to_bool), in any case: a
// command line written for it (`--bf16 True`, `--push_to_hub False`) reads the same here.
std::optional<bool> parse_bool(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (s == "true" || s == "t" || s == "yes" || s == "y" || s == "1") return true;
  if (s == "false" || s == "f" || s == "no" || s == "n" || s == "0") return false;
  return std::nullopt;
}

std::optional<double> parse_number(const std::string& s) {
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') return std::nullopt;
  return x;
}

// Whether `value` (a TOML scalar as scalar_text writes it, or a command-line word) is one of the
// values `field` accepts: the same text, the same boolean, or the same number.
bool hf_value_accepted(const HfField& field, const std::string& value) {
  for (const std::string_view accepted_view : field.accepted) {
    const std::string accepted(accepted_view);
    if (accepted == "*" || accepted == value) return true;
    const auto a = parse_bool(accepted);
    const auto b = parse_bool(value);
    if (a && b && *a == *b) return true;
    const auto x = parse_number(accepted);
    const auto y = parse_number(value);
    if (x && y && *x == *y) return true;
  }
  return false;
}

// field.accepted for a message: "false", "'adamw_torch' or 'adamw_torch_fused'", "any value".
std::string hf_accepted_values(const HfField& field) {
  std::string out;
  for (std::size_t i = 0; i < field.accepted.size(); ++i) {
    const std::string v(field.accepted[i]);
    if (v == "*") return "any value";
    if (i > 0) out += i + 1 == field.accepted.size() ? " or " : ", ";
    const bool bare = v == "true" || v == "false" || v == "[]" || parse_number(v).has_value();
    out += bare ? v : "'" + v + "'";
  }
  return out;
}

// A TOML value as hf_value_accepted compares it: a string as it is, a boolean as true/false,
// an array as [items], a table as {...} (never accepted).
std::string scalar_text(const toml::node& node) {
  if (const auto* v = node.as_string()) return v->get();
  if (const auto* v = node.as_boolean()) return v->get() ? "true" : "false";
  if (const auto* v = node.as_integer()) return std::to_string(v->get());
  if (const auto* v = node.as_floating_point()) return nlohmann::json(v->get()).dump();
  if (const auto* array = node.as_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < array->size(); ++i) out += (i > 0 ? ", " : "") + scalar_text((*array)[i]);
    return out + "]";
  }
  return "{...}";
}

// "'fp16 = true' is not available in Tenax: <why> (accepted here: false)".
std::string hf_refusal(const HfField& field, const std::string& shown) {
  std::string out = "'" + shown + "' is not available in Tenax: " + std::string(field.reason);
  if (field.accepted.empty()) return out + "; remove the key";
  return out + " (accepted here: " + hf_accepted_values(field) + ")";
}

// Tenax's keys, then transformers' names that the table answers: a typo of either is suggested.
std::vector<std::string> with_hf_names(std::vector<std::string> known) {
  for (const HfField& f : hf_field_table()) known.emplace_back(f.name);
  return known;
}

// Sets `target` from a TOML value; `where` is "FILE:LINE: " and `key` the dotted key.
void set_from_toml(const FieldTarget& target, const toml::node& node, const std::string& where,
                   const std::string& key) {
  const auto wrong_type = [&] {
    return ConfigError(where + "'" + key + "' must be " + a_type(target) + ", got " + toml_type_name(node));
  };
  std::visit(Overloaded{[&](std::string* v) {
                          if (!node.is_string()) throw wrong_type();
                          *v = node.as_string()->get();
                        },
                        [&](double* v) {
                          if (node.is_floating_point())
                            *v = node.as_floating_point()->get();
                          else if (node.is_integer())
                            *v = static_cast<double>(node.as_integer()->get());
                          else
                            throw wrong_type();
                        },
                        [&](std::int64_t* v) {
                          if (!node.is_integer()) throw wrong_type();
                          *v = node.as_integer()->get();
                        },
                        [&](std::uint64_t* v) {
                          if (!node.is_integer()) throw wrong_type();
                          const std::int64_t x = node.as_integer()->get();
                          if (x < 0)
                            throw ConfigError(where + "'" + key + "' must be a non-negative integer, got " +
                                              std::to_string(x));
                          *v = static_cast<std::uint64_t>(x);
                        },
                        [&](bool* v) {
                          if (!node.is_boolean()) throw wrong_type();
                          *v = node.as_boolean()->get();
                        },
                        [&](std::optional<bool>* v) {
                          if (!node.is_boolean()) throw wrong_type();
                          *v = node.as_boolean()->get();
                        },
                        [&](std::vector<std::string>* v) {
                          if (!node.is_array()) throw wrong_type();
                          std::vector<std::string> out;
                          const toml::array& array = *node.as_array();
                          for (std::size_t i = 0; i < array.size(); ++i) {
                            if (!array[i].is_string()) {
                              throw ConfigError(where + "'" + key + "' must be a list of strings, but item " +
                                                std::to_string(i) + " is " + toml_type_name(array[i]));
                            }
                            out.push_back(array[i].as_string()->get());
                          }
                          *v = std::move(out);
                        },
                        [&](ChoiceBase* v) {
                          if (!node.is_string()) throw wrong_type();
                          v->assign(node.as_string()->get());  // validate() names a spelling outside the set
                        }},
             target);
}

// Sets `target` from a command-line value; `flag` is the flag as the user typed it.
void set_from_string(const FieldTarget& target, const std::string& value, const std::string& flag) {
  const auto bad = [&](const std::string& what) { return ConfigError(flag + " '" + value + "' is not " + what); };
  std::visit(Overloaded{[&](std::string* v) { *v = value; },
                        [&](double* v) {
                          const auto x = parse_number(value);
                          if (!x) throw bad("a number");
                          *v = *x;
                        },
                        [&](std::int64_t* v) {
                          char* end = nullptr;
                          errno = 0;
                          const long long x = std::strtoll(value.c_str(), &end, 10);
                          if (value.empty() || *end != '\0') throw bad("an integer");
                          if (errno == ERANGE) throw bad("an integer that fits in 64 bits");
                          *v = x;
                        },
                        [&](std::uint64_t* v) {
                          char* end = nullptr;
                          errno = 0;
                          const unsigned long long x = std::strtoull(value.c_str(), &end, 10);
                          // strtoull accepts "-1" and wraps it around; a seed of 2^64-1 is not what was meant.
                          if (value.empty() || value[0] == '-' || *end != '\0') throw bad("a non-negative integer");
                          if (errno == ERANGE) throw bad("an integer that fits in 64 bits");
                          *v = x;
                        },
                        [&](bool* v) {
                          const auto b = parse_bool(value);
                          if (!b) throw bad("a boolean (true or false)");
                          *v = *b;
                        },
                        [&](std::optional<bool>* v) {
                          const auto b = parse_bool(value);
                          if (!b) throw bad("a boolean (true or false)");
                          *v = *b;
                        },
                        [&](std::vector<std::string>* v) {
                          std::vector<std::string> out;
                          std::stringstream items(value);
                          std::string item;
                          while (std::getline(items, item, ',')) {
                            const auto first = item.find_first_not_of(' ');
                            const auto last = item.find_last_not_of(' ');
                            if (first == std::string::npos) throw bad("a comma-separated list without empty items");
                            out.push_back(item.substr(first, last - first + 1));
                          }
                          *v = std::move(out);
                        },
                        [&](ChoiceBase* v) { v->assign(value); }},
             target);
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_name(const std::string& name, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const std::string& k : known) {
    const std::size_t d = edit_distance(name, k);
    // A typo (a third of the letters wrong at most), or a part of the name ("epochs").
    const bool plausible =
        d <= std::max<std::size_t>(2, name.size() / 3) || (name.size() >= 4 && k.find(name) != std::string::npos);
    if (plausible && d < best_distance) {
      best = k;
      best_distance = d;
    }
  }
  return best;
}

ArgumentParser::ArgumentParser(TrainingArguments& args) : args_(args) {
  for_each_field(args_, [&](const char* name, auto& field) {
    fields_.push_back({name, name, "", FieldTarget(&field)});
  });
}

void ArgumentParser::add_fields(const std::string& section,
                                const std::vector<std::pair<std::string, FieldTarget>>& fields) {
  if (section.empty() || section.find('.') != std::string::npos) {
    throw std::logic_error("ArgumentParser::add_section: '" + section + "' is not a plain table name");
  }
  for (const Field& f : fields_) {
    if (f.key == section || starts_with(f.key, section + ".")) {
      throw std::logic_error("ArgumentParser::add_section: the section name '" + section + "' is taken by " + f.key);
    }
  }
  for (const auto& field : fields) {
    const std::string& name = field.first;
    const bool duplicate =
        std::count_if(fields.begin(), fields.end(), [&](const auto& g) { return g.first == name; }) > 1;
    if (duplicate || find_flag(name) != nullptr) {
      throw std::logic_error("ArgumentParser::add_section: --" + name + " is already a key");
    }
  }
  for (const auto& [name, target] : fields) fields_.push_back({section + "." + name, name, section, target});
}

const ArgumentParser::Field* ArgumentParser::find_key(const std::string& key) const {
  for (const Field& f : fields_) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

const ArgumentParser::Field* ArgumentParser::find_flag(const std::string& flag) const {
  for (const Field& f : fields_) {
    if (f.flag == flag) return &f;
  }
  return nullptr;
}

void ArgumentParser::parse(const std::vector<std::string>& arguments) {
  std::optional<std::string> config;
  std::vector<std::string> overrides;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const std::string& a = arguments[i];
    std::optional<std::string> file;
    if (a == "--config") {
      if (i + 1 >= arguments.size()) throw ConfigError("--config needs a file name");
      file = arguments[++i];
    } else if (starts_with(a, "--config=")) {
      file = a.substr(9);
    } else {
      overrides.push_back(a);
      continue;
    }
    if (config) throw ConfigError("--config is given twice ('" + *config + "' and '" + *file + "')");
    config = file;
  }
  if (config) load_toml_file(*config);
  apply_overrides(overrides);
  args_.validate();
}

void ArgumentParser::load_toml_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError("config file " + file.string() + " cannot be read (missing, or no permission)");
  std::stringstream text;
  text << in.rdbuf();
  load_toml(text.str(), file.string());
}

void ArgumentParser::load_toml(const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw ConfigError(source + ":" + std::to_string(e.source().begin.line) + ":" +
                      std::to_string(e.source().begin.column) + ": not valid TOML: " + std::string(e.description()));
  }
  // Keys and table names, for suggestions.
  std::vector<std::string> known;
  for (const Field& f : fields_) {
    known.push_back(f.key);
    for (auto dot = f.key.find('.'); dot != std::string::npos; dot = f.key.find('.', dot + 1)) {
      known.push_back(f.key.substr(0, dot));
    }
  }
  const auto is_table = [&](const std::string& key) {
    return std::any_of(fields_.begin(), fields_.end(), [&](const Field& f) { return starts_with(f.key, key + "."); });
  };
  // Recursive: a table's keys are its path plus their own name.
  const auto walk = [&](const toml::table& table, const std::string& prefix, const auto& self) -> void {
    for (auto&& [name, node] : table) {
      const std::string key = prefix + std::string(name.str());
      // Implicit tables ([a.b] or a.b = 1) have no position of their own: use the key's.
      const std::string where = at(source, node.source().begin.line > 0 ? node.source() : name.source());
      if (const Field* field = find_key(key)) {
        set_from_toml(field->target, node, where, key);
        set_keys_.insert(field->key);
      } else if (const HfField* hf = prefix.empty() ? find_hf_field(key) : nullptr) {
        if (!hf->alias_of.empty()) {
          const Field* alias = find_key(std::string(hf->alias_of));
          if (alias == nullptr) throw std::logic_error("hf_field_table: " + key + " is an alias of no key");
          set_from_toml(alias->target, node, where, key);
          set_keys_.insert(alias->key);
          note(where + "'" + key + "' is read as '" + alias->key + "': " + std::string(hf->reason));
        } else {
          const std::string text = scalar_text(node);
          const std::string shown = key + " = " + (node.is_string() ? nlohmann::json(text).dump() : text);
          if (!hf_value_accepted(*hf, text)) throw ConfigError(where + hf_refusal(*hf, shown));
          note(where + "'" + shown + "' changes nothing in Tenax: " + std::string(hf->reason));
        }
      } else if (is_table(key)) {
        if (!node.is_table()) {
          throw ConfigError(where + "'" + key + "' must be a table ([" + key + "]), got " + toml_type_name(node));
        }
        self(*node.as_table(), key + ".", self);
      } else {
        throw ConfigError(at(source, name.source()) + "unknown key '" + key + "'" +
                          did_you_mean(key, with_hf_names(known), ""));
      }
    }
  };
  walk(root, "", walk);
}

void ArgumentParser::apply_overrides(const std::vector<std::string>& flags) {
  std::vector<std::string> known;
  for (const Field& f : fields_) {
    known.push_back(f.flag);
    if (f.key != f.flag) known.push_back(f.key);  // --data.max_seq_length finds its suggestion too
  }
  for (std::size_t i = 0; i < flags.size(); ++i) {
    // KEY=VALUE where an option is expected is --KEY=VALUE (`tenax train job.toml seed=3`); a
    // flag's value is taken below as it stands, '=' or not (--run_name a=b).
    const std::string a =
        !starts_with(flags[i], "-") && flags[i].find('=') != std::string::npos && flags[i].find('=') > 0
            ? "--" + flags[i]
            : flags[i];
    if (a.size() < 3 || !starts_with(a, "--")) {
      throw ConfigError("unexpected argument '" + a + "' (options are --key value, --key=value or key=value)");
    }
    const auto eq = a.find('=');
    const std::string typed = a.substr(0, eq);  // as the user wrote it, for messages
    std::string name = typed.substr(2);
    std::replace(name.begin(), name.end(), '-', '_');
    const Field* field = find_flag(name);
    if (field == nullptr) field = find_key(name);  // a program's option by its file key: --data.train_file
    const HfField* hf = field == nullptr ? find_hf_field(name) : nullptr;
    std::optional<std::string> value;
    if (eq != std::string::npos) value = a.substr(eq + 1);
    if (hf != nullptr && !hf->alias_of.empty()) {
      field = find_flag(std::string(hf->alias_of));
      if (field == nullptr) throw std::logic_error("hf_field_table: " + name + " is an alias of no key");
      note(typed + " is read as --" + field->flag + ": " + std::string(hf->reason));
    } else if (hf != nullptr) {
      // As transformers' parser reads it: `--push_to_hub` alone is true, else the next word.
      if (!value && i + 1 < flags.size() && !starts_with(flags[i + 1], "--")) value = flags[++i];
      const std::string shown = typed + (value ? " " + (value->empty() ? std::string("\"\"") : *value) : "");
      if (!hf_value_accepted(*hf, value.value_or("true"))) throw ConfigError(hf_refusal(*hf, shown));
      note("'" + shown + "' changes nothing in Tenax: " + std::string(hf->reason));
      continue;
    }
    if (field == nullptr)
      throw ConfigError(typed + ": unknown option" + did_you_mean(name, with_hf_names(known), "--"));
    if (std::holds_alternative<bool*>(field->target) || std::holds_alternative<std::optional<bool>*>(field->target)) {
      if (!value && i + 1 < flags.size() && parse_bool(flags[i + 1])) value = flags[++i];
      if (!value) value = "true";
    } else if (!value) {
      if (i + 1 >= flags.size()) throw ConfigError(typed + " needs a value (" + a_type(field->target) + ")");
      value = flags[++i];
    }
    set_from_string(field->target, *value, typed);
    set_keys_.insert(field->key);
  }
}

void ArgumentParser::note(const std::string& line) {
  notes_.push_back(line);
  logger("tenax.config", LogPolicy::kRankZeroOnly)->info("{}", line);
}

std::string ArgumentParser::to_toml() const {
  std::ostringstream out;
  std::vector<std::string> tables;  // in order of first appearance
  for (const Field& f : fields_) {
    const auto dot = f.key.find('.');
    if (dot == std::string::npos && is_unset(f.target)) {
      out << "# " << f.key << " unset: its default is inferred\n";
    } else if (dot == std::string::npos) {
      out << f.key << " = " << toml_value(f.target) << "\n";
    } else if (std::find(tables.begin(), tables.end(), f.key.substr(0, dot)) == tables.end()) {
      tables.push_back(f.key.substr(0, dot));
    }
  }
  for (const std::string& table : tables) {
    out << "\n[" << table << "]\n";
    for (const Field& f : fields_) {
      if (!starts_with(f.key, table + ".")) continue;
      if (is_unset(f.target)) {
        out << "# " << f.key.substr(table.size() + 1) << " unset: its default is inferred\n";
      } else {
        out << f.key.substr(table.size() + 1) << " = " << toml_value(f.target) << "\n";
      }
    }
  }
  return out.str();
}

std::string ArgumentParser::keys_help() const {
  std::ostringstream out;
  const std::string* section = nullptr;
  for (const Field& f : fields_) {
    if (section == nullptr || f.section != *section) {
      section = &f.section;
      out << (section->empty() ? "TrainingArguments (top level of the file; nested ones as tables):\n"
                               : "[" + *section + "] (the program's own):\n");
    }
    std::string line = "  --" + f.flag + " " + type_name(f.target);
    if (line.size() < 52) line.resize(52, ' ');
    out << line << " " << toml_value(f.target) << "\n";
  }
  return out.str();
}

}  // namespace tenax::sdk
