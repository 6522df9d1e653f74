#include "ckpt_inspect.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckpt_step_dir.h"
#include "tenax/core/checksum.h"
#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/core/files.h"
#include "tenax/storage/layout.h"

namespace tenax::launcher {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Prints rows indented, as columns at least two spaces apart: left-aligned, except the column
// `right_aligned` (numbers); the last column is not padded.
void print_table(const std::vector<std::vector<std::string>>& rows, std::size_t right_aligned = std::string::npos) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      line += "  ";
      if (c == right_aligned) {
        line += pad + row[c];
      } else {
        line += row[c];
        if (c + 1 < row.size()) line += pad;
      }
    }
    std::cout << line << "\n";
  }
}

void print_json_block(const char* title, const nlohmann::json& value) {
  std::cout << "\n" << title << ":\n";
  // Invalid UTF-8 cannot come out of parse_manifest, but printing must never throw.
  std::string text = value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string indented = "  ";
  for (char c : text) {
    indented += c;
    if (c == '\n') indented += "  ";
  }
  std::cout << indented << "\n";
}

void print_text(const std::string& step_dir, const storage::Manifest& m) {
  std::cout << "checkpoint " << step_dir << "\n";
  print_table({{"step", fmt::format("{}", m.step)},
               {"epoch", fmt::format("{}", m.epoch)},
               {"world size", fmt::format("{}", m.world_size)},
               {"generation", fmt::format("{}", m.generation)},
               {"format version", fmt::format("{}", m.format_version)}});

  std::uint64_t shard_bytes = 0;
  std::vector<std::vector<std::string>> shards = {{"FILE", "BYTES", "XXH3"}};
  for (const auto& s : m.shards) {
    shards.push_back({s.file, fmt::format("{}", s.bytes), checksum_hex(s.checksum)});
    shard_bytes += s.bytes;
  }
  std::cout << "\nshards (" << m.shards.size() << ", " << shard_bytes << " bytes):\n";
  print_table(shards, /*right_aligned=*/1);

  std::uint64_t tensor_bytes = 0;
  std::vector<std::vector<std::string>> tensors = {{"NAME", "DTYPE", "SHAPE", "BYTES", "SHARD"}};
  for (const auto& [name, e] : m.tensors) {  // a std::map: sorted by name
    tensors.push_back({name, storage::dtype_name(e.dtype), shape_text(e.shape), fmt::format("{}", e.nbytes), e.shard});
    tensor_bytes += e.nbytes;
  }
  std::cout << "\ntensors (" << m.tensors.size() << ", " << tensor_bytes << " bytes):\n";
  print_table(tensors, /*right_aligned=*/3);
  std::cout << "\ntotal: " << m.tensors.size() << " tensors, " << tensor_bytes << " tensor bytes in " << m.shards.size()
            << " shards of " << shard_bytes << " bytes\n";

  print_json_block("trainer_state", m.trainer_state);
  print_json_block("arguments", m.arguments);
  std::cout << "\nchecksums not verified here; `tenax ckpt verify " << step_dir << "` reads and checks every byte\n";
}

}  // namespace

int inspect_checkpoint(const std::string& step_dir, InspectFormat format) {
  int exit_code = kExitDone;
  auto reader = open_step_dir(step_dir, "inspect", exit_code);
  if (!reader) return exit_code;
  if (format == InspectFormat::kText) {
    print_text(step_dir, reader->manifest());
    return kExitDone;
  }
  // The file as stored, once the reader has validated it.
  try {
    std::cout << files::read_all(reader->step_dir() / storage::kManifestFile) << std::flush;
  } catch (const StorageError& e) {
    std::cerr << fmt::format("tenax ckpt inspect: {}\n", e.what());
    return kExitFailure;
  }
  return kExitDone;
}

}  // namespace tenax::launcher
