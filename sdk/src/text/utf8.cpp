#include "text/utf8.h"

#include <utf8proc.h>

#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "tenax/core/error.h"

namespace tenax::sdk::utf8 {
namespace {

// Where and why the sequence starting at `start` is not UTF-8: utf8proc only says that it is
// not. The byte ranges are those of the Unicode standard's table of well-formed sequences
// (3-7), checked in the order a reader meets them: the lead byte, the length, each continuation
// byte, then the second byte's range (overlong forms, surrogates, beyond U+10FFFF).
std::pair<std::size_t, const char*> diagnose(std::string_view bytes, std::size_t start) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(bytes[start + k]); };
  const unsigned char lead = at(0);
  if (lead < 0xC2) return {start, "not a lead byte"};
  if (lead > 0xF4) return {start, "lead byte out of range"};
  const std::size_t length = lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  if (bytes.size() - start < length) return {start, "sequence cut short by the end"};
  for (std::size_t k = 1; k < length; ++k) {
    if ((at(k) & 0xC0) != 0x80) return {start + k, "expected a continuation byte"};
  }
  const unsigned char second = at(1);
  if ((lead == 0xE0 && second < 0xA0) || (lead == 0xF0 && second < 0x90)) return {start, "overlong encoding"};
  if (lead == 0xED && second > 0x9F) return {start, "encodes a UTF-16 surrogate"};
  if (lead == 0xF4 && second > 0x8F) return {start, "beyond U+10FFFF"};
  return {start, utf8proc_errmsg(UTF8PROC_ERROR_INVALIDUTF8)};  // not reached: utf8proc and the table agree
}

[[noreturn]] void invalid(std::string_view what, std::string_view bytes, std::size_t start) {
  const auto [offset, why] = diagnose(bytes, start);
  throw Error(
      fmt::format("{}: invalid UTF-8 at byte {} (0x{:02X}: {}); decode the text as UTF-8, or replace "
                  "invalid bytes, before tokenizing",
                  what, offset, static_cast<unsigned char>(bytes[offset]), why));
}

}  // namespace

std::u32string decode(std::string_view bytes, std::string_view what) {
  std::u32string out;
  out.reserve(bytes.size());
  const auto* data = reinterpret_cast<const utf8proc_uint8_t*>(bytes.data());
  std::size_t i = 0;
  while (i < bytes.size()) {
    utf8proc_int32_t cp = 0;
    // Strict as RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF.
    const utf8proc_ssize_t n = utf8proc_iterate(data + i, static_cast<utf8proc_ssize_t>(bytes.size() - i), &cp);
    if (n <= 0) invalid(what, bytes, i);
    out.push_back(static_cast<char32_t>(cp));
    i += static_cast<std::size_t>(n);
  }
  return out;
}

void append(std::string& out, char32_t cp) {
  utf8proc_uint8_t buffer[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buffer);
  out.append(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(n));
}

std::string encode(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t cp : code_points) append(out, cp);
  return out;
}

}  // namespace tenax::sdk::utf8
