#include "flag_values.h"

#include <fmt/format.h>

#include <cstdint>
#include <limits>

#include "tenax/core/env.h"
#include "tenax/core/error.h"

namespace tenax::launcher {

void flag_error(const std::string& command, const std::string& message) {
  throw ConfigError(fmt::format("{}: {}", command, message));
}

int parse_flag_int(const std::string& command, const std::string& flag, const std::string& text, int min,
                   const char* meaning, const char* example) {
  std::int64_t value = 0;
  try {
    value = env::parse_int(text, flag);
  } catch (const ConfigError&) {
    flag_error(command, fmt::format("{0} expects {1}, got '{2}'; for example: {0} {3}", flag, meaning, text, example));
  }
  if (value < min || value > std::numeric_limits<int>::max()) {
    flag_error(command, fmt::format("{} must be at least {}, got {}", flag, min, text));
  }
  return static_cast<int>(value);
}

NodeRange parse_node_range(const std::string& command, const std::string& text) {
  const auto colon = text.find(':');
  NodeRange range;
  if (colon == std::string::npos) {
    range.min = range.max = parse_flag_int(command, "--nnodes", text, 1, "N or MIN:MAX nodes", "1:2");
  } else {
    range.min = parse_flag_int(command, "--nnodes", text.substr(0, colon), 1, "N or MIN:MAX nodes", "1:2");
    range.max = parse_flag_int(command, "--nnodes", text.substr(colon + 1), 1, "N or MIN:MAX nodes", "1:2");
  }
  if (range.min > range.max) {
    flag_error(command, fmt::format("--nnodes {}: MIN is above MAX; write MIN:MAX, e.g. --nnodes 1:2", text));
  }
  return range;
}

}  // namespace tenax::launcher
