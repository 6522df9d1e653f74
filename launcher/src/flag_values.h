// Values of command-line flags shared by the `tenax` subcommands (run, rdzv): whole numbers
// and node ranges, each refused with a ConfigError (exit code 2) that starts with the command,
// names the flag and shows a correct example.
// Thread-safety: pure functions.
#pragma once

#include <string>

namespace tenax::launcher {

/// --nnodes MIN:MAX (or N = N:N): how many nodes a generation needs and may have.
struct NodeRange {
  int min = 1;
  int max = 1;
  bool operator==(const NodeRange& o) const { return min == o.min && max == o.max; }
};

/// Throws ConfigError("<command>: <message>").
[[noreturn]] void flag_error(const std::string& command, const std::string& message);

/// A whole decimal number in [min, INT_MAX] for `flag`; `meaning` and `example` go into the error.
int parse_flag_int(const std::string& command, const std::string& flag, const std::string& text, int min,
                   const char* meaning, const char* example);

/// "2" → 2:2, "1:4" → 1:4 (the value of --nnodes); MIN above MAX is an error.
NodeRange parse_node_range(const std::string& command, const std::string& text);

}  // namespace tenax::launcher
