// The flags of one `tenax` subcommand, each declared once on a CLI11 app: the declaration gives
// the parsing (its callback turns the value into the command's options), its line in `--help`,
// and, for torchrun's flags that `tenax run` does not take, the refusal with what to write instead.
//
//   CommandFlags flags("tenax rdzv", Spelling::kExact);
//   flags.whole("--last-call", "SECONDS", {0, "whole seconds", "3"}, options.last_call,
//               "once MIN nodes joined, how long to wait for more (default 3)");
//   const CommandFlags::Stop stop = flags.parse(args);   // runs each flag's callback in order
//
// CLI11 converts and dispatches; CommandFlags stands in front of it for what tenax's command lines
// do that CLI11 2.1 does not: torchrun's underscore spellings (--nproc_per_node), the flag named as
// the user wrote it in every message, `--flag=` as an empty value, `--` never taken as a value,
// and the flags ending where the program starts (`tenax run ... train.py --lr 0.1`).
// Errors are ConfigError("<command>: <what>; <what to write>"), which the commands exit 2 on.
// Thread-safety: one instance per parse, used on one thread.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace tenax::launcher {

/// How flag names may be written.
enum class Spelling {
  kExact,     ///< as declared
  kTorchrun,  ///< also with underscores for dashes, as torchrun takes them (--nproc_per_node)
};

/// A whole number flag's bounds and the words of its error messages.
struct WholeNumber {
  int min = 0;
  const char* meaning = "";  ///< "a whole number of workers"
  const char* example = "";  ///< "2"
};

class CommandFlags {
 public:
  /// `command` ("tenax run") starts every message and `--help`'s usage line.
  CommandFlags(std::string command, Spelling spelling);
  ~CommandFlags();
  CommandFlags(const CommandFlags&) = delete;
  CommandFlags& operator=(const CommandFlags&) = delete;

  /// Where parse() stopped reading flags.
  struct Stop {
    enum class Kind {
      kEnd,          ///< after the last argument
      kDoubleDash,   ///< at `--` (`at` is the argument after it)
      kArgument,     ///< at an argument that is not a flag (the program, in torchrun's form)
      kUnknownFlag,  ///< at a flag nobody declared; `flag` is its name as written
    };
    Kind kind = Kind::kEnd;
    std::size_t at = 0;
    std::string flag;
  };

  /// Declarations that follow go under this heading in `--help` ("" = the first, "Options").
  void section(std::string heading);
  /// The lines of `--help` above the options (usage and what the command does), and below them.
  void describe(std::string usage, std::string footer);

  /// A flag with a value; `set` gets the value as written ("" for `--flag=`) and throws through
  /// fail() or flag_int() when it is not one. `example` completes "needs a value, e.g. FLAG ...".
  CLI::Option* value(const std::string& name, const std::string& value_name, std::string example,
                     const std::string& help, std::function<void(const std::string&)> set);
  /// A whole number in [number.min, INT_MAX] stored as T (int or a std::chrono duration).
  template <class T>
  CLI::Option* whole(const std::string& name, const std::string& value_name, WholeNumber number, T& out,
                     const std::string& help) {
    return value(name, value_name, number.example, help,
                 [this, number, &out](const std::string& text) { out = T(flag_int(text, number)); });
  }
  /// A flag without a value; `name` may list a short one ("-m,--module").
  CLI::Option* flag(const std::string& name, const std::string& help, std::function<void()> set);
  /// One of torchrun's flags this command does not take (`name` may list a short one: "-r,--redirects"),
  /// refused by name with what to write instead.
  void refuse(const std::string& names, const std::string& instead);

  /// Reads the flags at the start of `args` in order, running each one's callback; stops at the
  /// first argument that is not a declared flag. Throws ConfigError for a refused flag, a value
  /// missing or given to a flag that takes none, and whatever the callbacks throw.
  Stop parse(const std::vector<std::string>& args);
  /// True when -h/--help is among the flags (before where parse() would stop).
  bool help_requested(const std::vector<std::string>& args) const;
  /// The text of `--help`.
  std::string help() const;
  /// "--a, --b, ..., -m": the declared flags, for an error message.
  std::string known_flags() const;

  /// The flag being parsed, as the user wrote it (--nproc_per_node).
  const std::string& current_flag() const { return current_; }
  /// Throws ConfigError("<command>: <message>").
  [[noreturn]] void fail(const std::string& message) const;
  /// A whole number for the current flag (flag_values.h parse_flag_int).
  int flag_int(const std::string& text, const WholeNumber& number) const;

 private:
  struct Token;
  std::optional<Token> read_flag(const std::vector<std::string>& args, std::size_t& i) const;

  std::string command_;
  Spelling spelling_;
  std::unique_ptr<CLI::App> app_;
  std::string section_;
  std::string current_;
  std::map<const CLI::Option*, std::string> examples_;  ///< value flags: "needs a value, e.g. ..."
  std::map<const CLI::Option*, std::string> refused_;   ///< refused flags: what to write instead
};

}  // namespace tenax::launcher
