#include "text/utf8.h"

#include <cstdio>

#include "tenax/core/error.h"

namespace tenax::sdk::utf8 {
namespace {

[[noreturn]] void invalid(std::string_view what, std::string_view bytes, std::size_t offset,
                          const char* why) {
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(bytes[offset]));
  throw Error(std::string(what) + ": invalid UTF-8 at byte " + std::to_string(offset) + " (" +
              byte + ": " + why + "); decode the text as UTF-8, or replace invalid bytes, " +
              "before tokenizing");
}

}  // namespace

std::u32string decode(std::string_view bytes, std::string_view what) {
  std::u32string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    std::size_t length;
    char32_t cp;
    char32_t min;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      length = 2, cp = b0 & 0x1F, min = 0x80;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      length = 3, cp = b0 & 0x0F, min = 0x800;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      length = 4, cp = b0 & 0x07, min = 0x10000;
    } else {
      invalid(what, bytes, i, b0 < 0xC2 ? "not a lead byte" : "lead byte out of range");
    }
    if (bytes.size() - i < length) invalid(what, bytes, i, "sequence cut short by the end");
    for (std::size_t k = 1; k < length; ++k) {
      const auto b = static_cast<unsigned char>(bytes[i + k]);
      if ((b & 0xC0) != 0x80) invalid(what, bytes, i + k, "expected a continuation byte");
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min) invalid(what, bytes, i, "overlong encoding");
    if (cp >= 0xD800 && cp <= 0xDFFF) invalid(what, bytes, i, "encodes a UTF-16 surrogate");
    if (cp > 0x10FFFF) invalid(what, bytes, i, "beyond U+10FFFF");
    out.push_back(cp);
    i += length;
  }
  return out;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t cp : code_points) append(out, cp);
  return out;
}

}  // namespace tenax::sdk::utf8
