#include "store_values.h"

#include <cerrno>
#include <cstdlib>

#include "tenax/core/error.h"

namespace tenax::elastic::detail {

std::int64_t parse_counter(const std::string& key, const std::vector<char>& value) {
  if (value.empty()) return 0;
  const std::string text(value.begin(), value.end());
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') {
    throw RendezvousError("store key '" + key + "' holds '" + text +
                          "', not an integer counter; add() works only on counter keys");
  }
  return static_cast<std::int64_t>(parsed);
}

std::vector<char> encode_counter(std::int64_t value) {
  const std::string text = std::to_string(value);
  return std::vector<char>(text.begin(), text.end());
}

std::string quote_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) {
    if (!out.empty()) out += ", ";
    out += "'" + key + "'";
  }
  return out;
}

std::string missing_keys_message(const std::vector<std::string>& missing, std::chrono::milliseconds timeout,
                                 const std::string& where) {
  return "store key(s) " + quote_keys(missing) + " not set within " + std::to_string(timeout.count()) + " ms (" +
         where + "); a peer has not arrived or has died — check the other ranks' logs";
}

}  // namespace tenax::elastic::detail
