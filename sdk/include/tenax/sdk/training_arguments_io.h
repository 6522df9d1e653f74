// ArgumentParser: TrainingArguments (and a program's own options) from a TOML file plus
// `--key value` command-line overrides; the C++ counterpart of transformers' HfArgumentParser.
//
// Precedence: the defaults already in the structs < the TOML file (`--config FILE`) < the
// command line, whatever the order of the flags; then TrainingArguments::validate().
//
// The file: TrainingArguments fields at the top level with their for_each_field names, the
// nested ones as tables ([lr_scheduler_kwargs] power = 2.0); a program's own options in a
// section of their own ([finetune] max_length = 64). Every key must be a known field: an
// unknown key, a wrong type or an integer that does not fit is a ConfigError naming the file,
// the line and the key (with the closest known name as a suggestion). A double field accepts
// an integer; nothing else is converted.
//
// transformers' own fields are answered by name (sdk/src/hf_field_table.h): an old spelling
// (`evaluation_strategy`) is read as the Tenax key; a field whose value asks for what Tenax does
// anyway (`push_to_hub = false`) is accepted; any other value is refused with the reason and the
// Tenax way. Each alias and accepted no-op leaves a note (notes(), also logged), so that nothing
// in a config is dropped without a word.
//
// The command line: `--learning_rate 3e-5`, `--learning_rate=3e-5`, `--learning-rate 3e-5`
// (dashes stand for underscores), booleans as `--bf16`, `--bf16 false` or `--bf16=false`,
// lists comma-separated (`--report_to jsonl,tensorboard`; `--report_to ""` is empty), nested
// fields dotted (`--lr_scheduler_kwargs.power 2`). A program's own options go by their bare
// names (`--max_length 128`), so a program keeps the flags it had, or by their file key
// (`--finetune.max_length 128`).
//
// Why a program's options are a struct plus a visitor of its fields, not a list of named
// options: the program reads `o.max_length`, a typed member that the compiler checks, never
// `get<int>("max_length")`; the visitor is the same shape as for_each_field, so one list per
// struct serves the file, the command line, --help (keys_help) and the printout (to_toml); and
// the parser needs no registry of option objects, only (name, pointer) pairs. A field of a type
// the parser cannot read is a compile error.
//
// Thread-safety: none; one thread builds the options at start-up. The parser borrows the
// TrainingArguments and the section structs given to it: they must outlive it.
//
//   TrainingArguments args;                       // the program's defaults go in first
//   MyOptions mine;                               // std::string data_dir; std::int64_t max_length
//   ArgumentParser parser(args);
//   parser.add_section("mine", [&](auto&& field) {
//     field("data_dir", mine.data_dir);
//     field("max_length", mine.max_length);
//   });
//   parser.parse({argv + 1, argv + argc});        // --config FILE, --key value...; validates
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "tenax/sdk/training_arguments.h"

namespace tenax::sdk {

/// Where a field's value goes: one of the types for_each_field visits (a Choice as its base).
using FieldTarget = std::variant<std::string*, double*, std::int64_t*, std::uint64_t*, bool*, std::optional<bool>*,
                                 std::vector<std::string>*, ChoiceBase*>;

class ArgumentParser {
 public:
  /// Reads into `args` (borrowed; must outlive the parser). Its current values are the defaults.
  explicit ArgumentParser(TrainingArguments& args);

  /// Adds a program's own options: `visit_fields(field)` calls `field(name, member)` for each of
  /// them (members borrowed; they must outlive the parser). In the file they live in the table
  /// [section]; on the command line they are `--name`. Throws std::logic_error when a name is
  /// already taken (a program bug, not a configuration error).
  template <typename VisitFields>
  ArgumentParser& add_section(const std::string& section, VisitFields&& visit_fields) {
    std::vector<std::pair<std::string, FieldTarget>> fields;
    visit_fields([&](const char* name, auto& member) { fields.emplace_back(name, FieldTarget(&member)); });
    add_fields(section, fields);
    return *this;
  }

  /// The whole start-up: `arguments` is argv without the program name. Loads `--config FILE`
  /// (or `--config=FILE`) if given, then applies every other `--key value`, then validates the
  /// TrainingArguments. Throws ConfigError naming the key (and file and line) on any error.
  void parse(const std::vector<std::string>& arguments);

  /// Sets the fields that the TOML file `file` names. Does not validate.
  void load_toml_file(const std::filesystem::path& file);
  /// Sets the fields that the TOML document `text` names; `source` names it in errors.
  void load_toml(const std::string& text, const std::string& source);
  /// Applies `--key value` / `--key=value` / `--flag` / `key=value` overrides in order. Does not
  /// validate.
  void apply_overrides(const std::vector<std::string>& flags);

  /// Every field with its current value, as a TOML document that load_toml reads back.
  std::string to_toml() const;
  /// One line per key: its command-line name, type and current value (for --help).
  std::string keys_help() const;

  /// What the parse read differently from what was written, one line each, as logged: a
  /// transformers field read under its Tenax key, or accepted with no effect (and why).
  const std::vector<std::string>& notes() const { return notes_; }
  /// The keys the file and the command line set, by their file name ("learning_rate",
  /// "lr_scheduler_kwargs.power"; an old spelling under the key it is read as): for a program
  /// that honours only some of them and must refuse the others rather than ignore them.
  const std::set<std::string>& set_keys() const { return set_keys_; }

 private:
  struct Field {
    std::string key;      // in the file: "learning_rate", "lr_scheduler_kwargs.power", "finetune.max_length"
    std::string flag;     // on the command line, without "--": "learning_rate", "max_length"
    std::string section;  // "" for TrainingArguments, else the program's table
    FieldTarget target;
  };
  void add_fields(const std::string& section, const std::vector<std::pair<std::string, FieldTarget>>& fields);
  const Field* find_key(const std::string& key) const;
  const Field* find_flag(const std::string& flag) const;
  void note(const std::string& line);

  TrainingArguments& args_;
  std::vector<Field> fields_;
  std::vector<std::string> notes_;
  std::set<std::string> set_keys_;
};

/// The known name closest to `name` (edit distance, or one contains the other), or "" when none
/// is close enough to be a plausible typo.
std::string closest_name(const std::string& name, const std::vector<std::string>& known);

}  // namespace tenax::sdk
