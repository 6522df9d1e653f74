#include "text/basic_tokenizer.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "tenax/core/error.h"
#include "text/bert_chars.h"
#include "text/utf8.h"

namespace tenax::sdk::basic_tokenizer {
namespace {

// Canonical decomposition with canonical reordering: utf8proc does the reordering only over a
// whole string, so the text goes through UTF-8 once.
std::u32string nfd(std::u32string_view text) {
  const std::string bytes = utf8::encode(text);
  const auto* data = reinterpret_cast<const utf8proc_uint8_t*>(bytes.data());
  const auto length = static_cast<utf8proc_ssize_t>(bytes.size());
  utf8proc_ssize_t needed = utf8proc_decompose(data, length, nullptr, 0, UTF8PROC_DECOMPOSE);
  std::u32string out;
  for (;;) {
    if (needed < 0) throw Error(std::string("utf8proc_decompose: ") + utf8proc_errmsg(needed));
    std::unique_ptr<utf8proc_int32_t[]> buffer(new utf8proc_int32_t[needed > 0 ? needed : 1]);
    const utf8proc_ssize_t got =
        utf8proc_decompose(data, length, buffer.get(), needed, UTF8PROC_DECOMPOSE);
    if (got < 0) throw Error(std::string("utf8proc_decompose: ") + utf8proc_errmsg(got));
    if (got <= needed) {
      out.assign(buffer.get(), buffer.get() + got);
      return out;
    }
    needed = got;
  }
}

// Rust's char::to_lowercase: utf8proc's simple mapping plus the one unconditional
// multi-character lowercase mapping of SpecialCasing.txt (U+0130 -> i + U+0307).
void append_lower(std::u32string& out, char32_t c) {
  if (c == 0x130) {
    out.push_back(U'i');
    out.push_back(0x307);
    return;
  }
  out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

}  // namespace

std::u32string normalize(std::u32string_view text, const Flags& flags) {
  std::u32string out;
  out.reserve(text.size() + 8);
  for (char32_t c : text) {
    if (flags.clean_text) {
      if (c == 0 || c == 0xFFFD || bert_chars::is_control(c)) continue;
      if (bert_chars::is_whitespace(c)) c = U' ';
    }
    if (flags.handle_chinese_chars && bert_chars::is_cjk(c)) {
      out.push_back(U' ');
      out.push_back(c);
      out.push_back(U' ');
    } else {
      out.push_back(c);
    }
  }
  if (flags.strip_accents) {
    std::u32string decomposed = nfd(out);
    out.clear();
    for (char32_t c : decomposed) {
      if (!bert_chars::is_nonspacing_mark(c)) out.push_back(c);
    }
  }
  if (flags.lowercase) {
    std::u32string lowered;
    lowered.reserve(out.size());
    for (char32_t c : out) append_lower(lowered, c);
    out.swap(lowered);
  }
  return out;
}

std::vector<std::u32string> split_words(std::u32string_view normalised) {
  std::vector<std::u32string> words;
  std::u32string current;
  for (char32_t c : normalised) {
    if (bert_chars::is_whitespace(c)) {
      if (!current.empty()) words.push_back(std::move(current)), current.clear();
    } else if (bert_chars::is_punctuation(c)) {
      if (!current.empty()) words.push_back(std::move(current)), current.clear();
      words.emplace_back(1, c);
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) words.push_back(std::move(current));
  return words;
}

}  // namespace tenax::sdk::basic_tokenizer
