// Tenax's side of bench/tokenizer_bench.py: texts per second of tenax::sdk::BertTokenizer on the
// calling thread, one text at a time (encode) and in batches (encode_batch, padded to the
// longest of each batch), with truncation to --max-length. bench/tokenizer_bench_hf.py is the
// same program for Hugging Face's BertTokenizerFast; the driver runs both on one pinned core.
//
//   tokenizer_bench MODEL_DIR TEXTS_FILE [--max-length 128] [--batch 64] [--passes 3]
//
// TEXTS_FILE holds one text per line (UTF-8). Output, one line per mode:
//   single <seconds> <texts> <tokens> <id_sum>
//   batch  <seconds> <texts> <tokens> <id_sum>
// over --passes timed passes of every text, after one untimed pass (which loads the vocabulary's
// pages and the allocator's arenas, and whose encodings give the totals, outside the timing). tokens and id_sum (of
// every id, padding included) let the driver check that both systems produced the same encodings, so a faster wrong
// answer is not a result.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tenax/sdk/text/bert_tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using tenax::sdk::BertTokenizer;
using tenax::sdk::EncodeOptions;
using tenax::sdk::Encoding;

struct Totals {
  std::uint64_t tokens = 0;
  std::uint64_t id_sum = 0;
  void add(const Encoding& e) {
    tokens += e.size();
    for (const std::int32_t id : e.input_ids) id_sum += static_cast<std::uint64_t>(id);
  }
};

struct Args {
  std::string model_dir;
  std::string texts_file;
  std::int64_t max_length = 128;
  std::size_t batch = 64;
  int passes = 3;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "tokenizer_bench: %s\nusage: tokenizer_bench MODEL_DIR TEXTS_FILE [--max-length N] [--batch N] "
               "[--passes N]\n",
               why.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> long {
      if (i + 1 >= argc) usage(std::string(arg) + " needs a value");
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v <= 0) usage(std::string(arg) + ": expected a positive integer, got '" + argv[i] + "'");
      return v;
    };
    if (arg == "--max-length") {
      a.max_length = value();
    } else if (arg == "--batch") {
      a.batch = static_cast<std::size_t>(value());
    } else if (arg == "--passes") {
      a.passes = static_cast<int>(value());
    } else if (arg.rfind("--", 0) == 0) {
      usage("unknown option " + std::string(arg));
    } else {
      positional.emplace_back(arg);
    }
  }
  if (positional.size() != 2) usage("expected MODEL_DIR and TEXTS_FILE");
  a.model_dir = positional[0];
  a.texts_file = positional[1];
  return a;
}

std::vector<std::string> read_lines(const std::string& file) {
  std::ifstream in(file);
  if (!in) usage("cannot open " + file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  if (lines.empty()) usage(file + " holds no text");
  return lines;
}

std::vector<Encoding> single(const BertTokenizer& tok, const std::vector<std::string>& texts,
                             const EncodeOptions& options) {
  std::vector<Encoding> out;
  out.reserve(texts.size());
  for (const std::string& text : texts) out.push_back(tok.encode(text, options));
  return out;
}

std::vector<Encoding> batched(const BertTokenizer& tok, const std::vector<std::string>& texts, std::size_t batch,
                              const EncodeOptions& options) {
  std::vector<Encoding> out;
  out.reserve(texts.size());
  std::vector<std::string> chunk;
  for (std::size_t begin = 0; begin < texts.size(); begin += batch) {
    const std::size_t end = std::min(texts.size(), begin + batch);
    chunk.assign(texts.begin() + static_cast<std::ptrdiff_t>(begin), texts.begin() + static_cast<std::ptrdiff_t>(end));
    for (Encoding& e : tok.encode_batch(chunk, options)) out.push_back(std::move(e));
  }
  return out;
}

// One untimed pass (warm-up, and the totals that check the encodings), then `passes` timed ones.
template <typename Run>
void timed(const char* mode, int passes, std::size_t texts, Run run) {
  Totals totals;
  for (const Encoding& e : run()) totals.add(e);
  const auto start = Clock::now();
  std::size_t kept = 0;
  for (int p = 0; p < passes; ++p) kept += run().size();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (kept != texts * static_cast<std::size_t>(passes)) usage("an encoding went missing");
  const auto n = static_cast<unsigned long long>(passes);
  std::printf("%s %.6f %zu %llu %llu\n", mode, seconds, texts * static_cast<std::size_t>(passes),
              static_cast<unsigned long long>(totals.tokens) * n, static_cast<unsigned long long>(totals.id_sum) * n);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const BertTokenizer tok = BertTokenizer::from_pretrained(a.model_dir);
  const std::vector<std::string> texts = read_lines(a.texts_file);
  const EncodeOptions one = EncodeOptions().max_length(a.max_length).truncation(tenax::sdk::Truncation::kLongestFirst);
  EncodeOptions padded = one;
  padded.padding(tenax::sdk::Padding::kLongest);
  timed("single", a.passes, texts.size(), [&] { return single(tok, texts, one); });
  timed("batch", a.passes, texts.size(), [&] { return batched(tok, texts, a.batch, padded); });
  return 0;
}
