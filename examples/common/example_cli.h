// The command line and the exit statuses that the example jobs (finetune_text)
// share, so that `--help`, `--print-config`, `--epochs` and exit 2 for a configuration error
// mean the same in each. Header-only, as the rest of examples/common.
#pragma once

#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/sdk/training_arguments_io.h"

namespace tenax::examples {

/// Parses argv into `parser` (TrainingArguments keys and the program's own section):
/// `--help` prints `usage` and the keys, `--print-config` the resolved TOML (both exit 0),
/// `--epochs X` is `--num_train_epochs X`, and `validate` runs after the parse. A ConfigError
/// from either ends the process with exit 2 and "PROGRAM: configuration error: ...".
inline void parse_example_command_line(sdk::ArgumentParser& parser, int argc, char** argv, const std::string& program,
                                       const char* usage, const std::function<void()>& validate) {
  std::vector<std::string> arguments;
  bool print_config = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage << parser.keys_help();
      std::exit(kExitDone);
    }
    if (a == "--print-config") {
      print_config = true;
    } else if (a == "--epochs") {  // the examples' flag from before the config file
      arguments.push_back("--num_train_epochs");
    } else if (a.rfind("--epochs=", 0) == 0) {
      arguments.push_back("--num_train_epochs=" + a.substr(9));
    } else {
      arguments.push_back(a);
    }
  }
  try {
    parser.parse(arguments);
    validate();
  } catch (const ConfigError& e) {
    std::cerr << program << ": configuration error: " << e.what() << "\n"
              << "(" << program << " --help lists the keys)\n";
    std::exit(kExitUsage);
  }
  if (print_config) {
    std::cout << parser.to_toml();
    std::exit(kExitDone);
  }
}

/// Runs an example's job and maps what escapes it to an exit status: a ConfigError (found once
/// the data or the model is seen) is 2, any other error 1, each printed with the program's name.
inline int run_example(const std::string& program, const std::function<int()>& run) {
  try {
    return run();
  } catch (const ConfigError& e) {
    std::cerr << program << ": configuration error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace tenax::examples
