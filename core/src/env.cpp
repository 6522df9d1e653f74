#include "tenax/core/env.h"

#include <cerrno>
#include <cstdlib>

#include "tenax/core/error.h"

namespace tenax::env {

std::optional<std::string> get(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

std::string require(const std::string& name) {
  auto v = get(name);
  if (!v) {
    throw ConfigError("environment variable " + name +
                      " is not set; start this program with `tenax run` or set it yourself");
  }
  return *v;
}

std::int64_t parse_int(const std::string& text, const std::string& what) {
  if (text.empty()) throw ConfigError(what + " is empty; expected an integer");
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') {
    throw ConfigError(what + "='" + text + "' is not an integer");
  }
  return static_cast<std::int64_t>(v);
}

std::int64_t require_int(const std::string& name) { return parse_int(require(name), name); }

std::int64_t get_int(const std::string& name, std::int64_t fallback) {
  auto v = get(name);
  return v ? parse_int(*v, name) : fallback;
}

}  // namespace tenax::env
