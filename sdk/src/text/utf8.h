// Strict UTF-8 decoding (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF)
// and encoding, for the tokenizer, on utf8proc; what this adds is the error message, which
// names the offending byte and why. Private to tenax::sdk.
#pragma once

#include <string>
#include <string_view>

namespace tenax::sdk::utf8 {

/// Code points of `bytes`. Throws tenax::Error naming `what`, the byte offset and the bad
/// byte when `bytes` is not valid UTF-8.
std::u32string decode(std::string_view bytes, std::string_view what);

/// Appends the UTF-8 form of `cp` (a valid scalar value) to `out`.
void append(std::string& out, char32_t cp);

/// The UTF-8 form of `code_points`.
std::string encode(std::u32string_view code_points);

}  // namespace tenax::sdk::utf8
