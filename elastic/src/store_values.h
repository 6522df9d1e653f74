// Private helpers shared by the Store implementations: the text encoding of counters (as in
// Gloo's and c10d's stores, so a counter reads back as its decimal text) and the wording of
// timeout errors, which name the keys that were missing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tenax::elastic::detail {

/// The counter held under `key`; absent (empty) = 0. Throws RendezvousError naming the key
/// when the value is not a decimal integer.
std::int64_t parse_counter(const std::string& key, const std::vector<char>& value);

std::vector<char> encode_counter(std::int64_t value);

/// "'a', 'b'"
std::string quote_keys(const std::vector<std::string>& keys);

/// The message of the TimeoutError thrown when `missing` keys did not appear in time.
std::string missing_keys_message(const std::vector<std::string>& missing, std::chrono::milliseconds timeout,
                                 const std::string& where);

}  // namespace tenax::elastic::detail
