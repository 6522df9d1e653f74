// Typed reading of environment variables. Errors name the variable and what was found.
// Thread-safety: reads the process environment; do not race with setenv.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tenax::env {

/// The value, or nullopt when unset. An empty value counts as set.
std::optional<std::string> get(const std::string& name);

/// The value; throws ConfigError naming the variable when it is unset.
std::string require(const std::string& name);

/// Parses a whole decimal integer; throws ConfigError "NAME='x' is not an integer".
std::int64_t require_int(const std::string& name);

/// The integer value, or `fallback` when unset.
std::int64_t get_int(const std::string& name, std::int64_t fallback);

/// Parses `text` as a whole decimal integer; `what` names it in the error.
std::int64_t parse_int(const std::string& text, const std::string& what);

}  // namespace tenax::env
