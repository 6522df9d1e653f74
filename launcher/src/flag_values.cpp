#include "flag_values.h"

#include <cstdint>
#include <limits>

#include "tenax/core/env.h"
#include "tenax/core/error.h"

namespace tenax::launcher {

void flag_error(const std::string& command, const std::string& message) {
  throw ConfigError(command + ": " + message);
}

int parse_flag_int(const std::string& command, const std::string& flag, const std::string& text, int min,
                   const char* meaning, const char* example) {
  std::int64_t value = 0;
  try {
    value = env::parse_int(text, flag);
  } catch (const ConfigError&) {
    flag_error(command, flag + " expects " + meaning + ", got '" + text + "'; for example: " + flag + " " + example);
  }
  if (value < min || value > std::numeric_limits<int>::max()) {
    flag_error(command, flag + " must be at least " + std::to_string(min) + ", got " + text);
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
    flag_error(command, "--nnodes " + text + ": MIN is above MAX; write MIN:MAX, e.g. --nnodes 1:2");
  }
  return range;
}

}  // namespace tenax::launcher
