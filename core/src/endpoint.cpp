#include "tenax/core/endpoint.h"

#include <fmt/format.h>

#include "tenax/core/error.h"

namespace tenax {

Endpoint Endpoint::parse(const std::string& text, bool allow_any_port) {
  constexpr const char* kScheme = "tcp://";
  const std::string rest = text.rfind(kScheme, 0) == 0 ? text.substr(6) : text;
  const auto colon = rest.rfind(':');
  const std::string digits = colon == std::string::npos ? "" : rest.substr(colon + 1);
  const auto fail = [&](const char* what) {
    return ConfigError(fmt::format("endpoint '{}' {}: write it as tcp://HOST:PORT with a port in {}..65535", text, what,
                                   allow_any_port ? 0 : 1));
  };
  if (colon == std::string::npos || colon == 0) throw fail("has no host");
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos) {
    throw fail("has no port");
  }
  const int port = std::stoi(digits);
  if (port > 65535 || (port == 0 && !allow_any_port)) throw fail("has no port");
  return {rest.substr(0, colon), port};
}

std::string Endpoint::str() const { return fmt::format("tcp://{}:{}", host, port); }

std::string Endpoint::host_port() const { return fmt::format("{}:{}", host, port); }

bool Endpoint::wildcard() const { return host == "*" || host == "0.0.0.0" || host == "[::]" || host == "::"; }

}  // namespace tenax
