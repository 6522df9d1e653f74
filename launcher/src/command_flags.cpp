#include "command_flags.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <map>
#include <utility>

#include "flag_values.h"

namespace tenax::launcher {
namespace {

// `--help` as tenax writes it: the command's own usage lines in place of CLI11's one-line usage.
class UsageFormatter : public CLI::Formatter {
 public:
  explicit UsageFormatter(std::string usage) : usage_(std::move(usage)) {}
  std::string make_usage(const CLI::App*, std::string) const override { return usage_ + "\n"; }
  // One blank line between sections (CLI11 writes two).
  std::string make_group(std::string group, bool is_positional, std::vector<const CLI::Option*> opts) const override {
    return CLI::Formatter::make_group(std::move(group), is_positional, std::move(opts)).substr(1);
  }

 private:
  std::string usage_;
};

bool takes_value(const CLI::Option& option) { return option.get_items_expected_max() > 0; }

}  // namespace

// One flag as written: `--name value`, `--name=value` or a switch.
struct CommandFlags::Token {
  std::string written;               ///< the name as the user wrote it, without "=value"
  CLI::Option* option = nullptr;     ///< nullptr: nobody declared it
  std::optional<std::string> value;  ///< unset: none given (or, for a switch, none needed)
};

CommandFlags::CommandFlags(std::string command, Spelling spelling)
    : command_(std::move(command)), spelling_(spelling), app_(std::make_unique<CLI::App>("", command_)) {
  app_->set_help_flag("-h,--help", "show this help");
}

CommandFlags::~CommandFlags() = default;

void CommandFlags::section(std::string heading) { section_ = std::move(heading); }

void CommandFlags::describe(std::string usage, std::string footer) {
  app_->formatter(std::make_shared<UsageFormatter>(std::move(usage)));
  app_->footer(std::move(footer));
}

CLI::Option* CommandFlags::value(const std::string& name, const std::string& value_name, std::string example,
                                 const std::string& help, std::function<void(const std::string&)> set) {
  CLI::Option* option = app_->add_option_function<std::string>(name, std::move(set), help)->type_name(value_name);
  if (!section_.empty()) option->group(section_);
  examples_[option] = std::move(example);
  return option;
}

CLI::Option* CommandFlags::flag(const std::string& name, const std::string& help, std::function<void()> set) {
  CLI::Option* option = app_->add_flag_callback(name, std::move(set), help);
  if (!section_.empty()) option->group(section_);
  return option;
}

void CommandFlags::refuse(const std::string& names, const std::string& instead) {
  CLI::Option* option = app_->add_flag(names, instead);
  if (!section_.empty()) option->group(section_);
  refused_[option] = instead;
}

std::optional<CommandFlags::Token> CommandFlags::read_flag(const std::vector<std::string>& args, std::size_t& i) const {
  const std::string& arg = args[i];
  if (arg.size() < 2 || arg[0] != '-' || arg == "--") return std::nullopt;
  Token token;
  token.written = arg;
  if (const auto eq = arg.find('='); eq != std::string::npos) {
    token.written = arg.substr(0, eq);
    token.value = arg.substr(eq + 1);
  }
  std::string name = token.written;
  if (spelling_ == Spelling::kTorchrun && name.rfind("--", 0) == 0) {
    for (std::size_t c = 2; c < name.size(); ++c) {
      if (name[c] == '_') name[c] = '-';
    }
  }
  token.option = app_->get_option_no_throw(name);
  ++i;
  // The next argument is the value, unless it is `--`: the flags end there.
  if (token.option != nullptr && takes_value(*token.option) && !token.value && i < args.size() && args[i] != "--") {
    token.value = args[i++];
  }
  return token;
}

CommandFlags::Stop CommandFlags::parse(const std::vector<std::string>& args) {
  std::size_t i = 0;
  while (i < args.size()) {
    if (args[i] == "--") return Stop{Stop::Kind::kDoubleDash, i + 1, ""};
    const std::size_t start = i;
    const std::optional<Token> token = read_flag(args, i);
    if (!token) return Stop{Stop::Kind::kArgument, start, ""};
    if (token->option == nullptr) return Stop{Stop::Kind::kUnknownFlag, start, token->written};
    current_ = token->written;
    if (const auto refused = refused_.find(token->option); refused != refused_.end()) {
      fail(fmt::format("torchrun's flag {} is not one of {}'s: {}", current_, command_, refused->second));
    }
    if (token->option == app_->get_help_ptr()) continue;  // help_requested() answers it
    // CLI11 parses the flag in its declared name, one at a time, so that each callback's
    // messages can name the flag as written (current_flag()).
    const CLI::Option& option = *token->option;
    const std::string name =
        option.get_lnames().empty() ? "-" + option.get_snames().front() : "--" + option.get_lnames().front();
    if (!takes_value(option)) {
      if (token->value) fail(fmt::format("{0} takes no value; write {0} alone", current_));
      app_->parse(std::vector<std::string>{name});
    } else {
      if (!token->value) fail(fmt::format("{0} needs a value, e.g. {0} {1}", current_, examples_.at(&option)));
      app_->parse(std::vector<std::string>{*token->value, name});  // CLI11 reads the vector from the back
    }
  }
  return Stop{Stop::Kind::kEnd, args.size(), ""};
}

bool CommandFlags::help_requested(const std::vector<std::string>& args) const {
  for (std::size_t i = 0; i < args.size() && args[i] != "--";) {
    const std::optional<Token> token = read_flag(args, i);
    if (!token) return false;  // the program: the rest is its own
    if (token->option != nullptr && token->option == app_->get_help_ptr()) return true;
  }
  return false;
}

std::string CommandFlags::help() const { return app_->help(); }

std::string CommandFlags::known_flags() const {
  std::vector<std::string> names;
  std::vector<std::string> short_names;
  for (const CLI::Option* option : app_->get_options()) {
    if (option == app_->get_help_ptr() || refused_.count(option) != 0) continue;
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) short_names.push_back("-" + name);
  }
  names.insert(names.end(), short_names.begin(), short_names.end());
  return fmt::format("{}", fmt::join(names, ", "));
}

void CommandFlags::fail(const std::string& message) const { flag_error(command_, message); }

int CommandFlags::flag_int(const std::string& text, const WholeNumber& number) const {
  return parse_flag_int(command_, current_, text, number.min, number.meaning, number.example);
}

}  // namespace tenax::launcher
