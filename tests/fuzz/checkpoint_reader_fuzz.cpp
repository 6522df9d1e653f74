// libFuzzer target for everything in storage/ that reads bytes a checkpoint brings back from
// disk or from another rank: parse_manifest, shard_info_from_json and CheckpointReader
// (open, verify_all, read) over a manifest plus HDF5 shard files. The input encoding is in
// fuzz_input.h; tests/fuzz/README.md says how to run it.
//
// The contract under test (checkpoint_reader.h, manifest.h): arbitrary bytes never crash,
// leak, hit undefined behaviour or throw; every fault comes back as a non-OK Status with the
// documented code; and whatever comes back OK is self-consistent (round trips are stable, a
// tensor read OK matches its index entry and checksum). A violation aborts with a message, so
// libFuzzer records the input, and the corpus replay in `make test` fails.
//
// Checkpoint modes write the files into a scratch step directory that belongs to this process
// (under /dev/shm when it exists, for speed), emptied before each input and removed at exit.
//
// Sealed inputs on which libhdf5 1.10.8 itself crashes are skipped (hdf5_probe.h), counted,
// reported at exit and, with TENAX_FUZZ_HDF5_CRASH_DIR=<dir>, saved there for triage;
// TENAX_FUZZ_NO_PROBE=1 runs them through the reader anyway, to see where they crash.
//
// Thread-safety: libFuzzer calls LLVMFuzzerTestOneInput from one thread; so does the replay.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "fuzz/hdf5_probe.h"
#include "tenax/core/checksum.h"
#include "tenax/core/status.h"
#include "tenax/storage/checkpoint_reader.h"
#include "tenax/storage/layout.h"
#include "tenax/storage/manifest.h"
#include "tenax/storage/shard_writer.h"

namespace tenax::storage::fuzz {
namespace {

namespace fs = std::filesystem;

// A broken promise of the code under test (or an environment failure of the harness itself).
[[noreturn]] void violated(const std::string& what) {
  std::fprintf(stderr, "checkpoint_reader_fuzz: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

void expect(bool holds, const std::string& what) {
  if (!holds) violated(what);
}

void expect_code(const Status& status, std::initializer_list<StatusCode> allowed, const std::string& call) {
  for (StatusCode code : allowed) {
    if (status.code() == code) return;
  }
  violated(call + " returned an undocumented status: " + status.to_string());
}

// The step directory the checkpoint modes write into; one per process, removed at exit.
class ScratchStep {
 public:
  ScratchStep() {
    std::error_code ec;
    const fs::path shm = "/dev/shm";
    const fs::path base =
        fs::is_directory(shm, ec) && ::access(shm.c_str(), W_OK) == 0 ? shm : fs::temp_directory_path();
    root_ = base / ("tenax-fuzz-" + std::to_string(::getpid()));
    fs::remove_all(root_, ec);
    step_ = root_ / step_dir_name(1);
    fs::create_directories(step_, ec);
    if (ec) violated("cannot create " + step_.string() + ": " + ec.message());
  }
  ~ScratchStep() {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  ScratchStep(const ScratchStep&) = delete;
  ScratchStep& operator=(const ScratchStep&) = delete;

  /// The step directory, emptied.
  const fs::path& fresh() const {
    std::error_code ec;
    for (const fs::directory_entry& entry : fs::directory_iterator(step_, ec)) {
      fs::remove_all(entry.path(), ec);
      if (ec) break;
    }
    if (ec) violated("cannot empty " + step_.string() + ": " + ec.message());
    return step_;
  }

 private:
  fs::path root_;
  fs::path step_;
};

const fs::path& fresh_step_dir() {
  static const ScratchStep scratch;
  return scratch.fresh();
}

// Sealed inputs skipped because libhdf5 alone crashed or hung on them; reported at exit.
class SkippedInputs {
 public:
  ~SkippedInputs() {
    if (crashed_ + hung_ > 0) {
      std::fprintf(stderr,
                   "checkpoint_reader_fuzz: skipped %zu executions of sealed inputs on which "
                   "libhdf5 alone crashed, %zu on which it hung (tests/fuzz/README.md)\n",
                   crashed_, hung_);
    }
  }
  void add(ProbeResult result, std::string_view input) {
    (result == ProbeResult::kHung ? hung_ : crashed_) += 1;
    const char* dir = std::getenv("TENAX_FUZZ_HDF5_CRASH_DIR");
    if (dir == nullptr) return;
    const std::string name = std::string(result == ProbeResult::kHung ? "hdf5-hang-" : "hdf5-crash-") +
                             checksum_hex(xxh3_64(input.data(), input.size()));
    std::ofstream(fs::path(dir) / name, std::ios::binary)
        .write(input.data(), static_cast<std::streamsize>(input.size()));
  }

 private:
  std::size_t crashed_ = 0;
  std::size_t hung_ = 0;
};

SkippedInputs& skipped_inputs() {
  static SkippedInputs skipped;
  return skipped;
}

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) violated("cannot write " + path.string());
}

// JSON the harness itself inspects, with the same nesting limit as parse_manifest (copying
// and printing JSON recurses). Discarded when invalid or too deep.
nlohmann::json parse_bounded(std::string_view text) {
  constexpr int kMaxDepth = 64;
  bool too_deep = false;
  const nlohmann::json::parser_callback_t limit = [&too_deep](int depth, nlohmann::json::parse_event_t,
                                                              nlohmann::json&) {
    if (depth > kMaxDepth) too_deep = true;
    return !too_deep;
  };
  nlohmann::json parsed = nlohmann::json::parse(text, limit, /*allow_exceptions=*/false);
  if (too_deep) return nlohmann::json(nlohmann::json::value_t::discarded);
  return parsed;
}

std::string dump(const nlohmann::json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// ---- mode kManifest ----------------------------------------------------------------------

void fuzz_manifest(const std::string& text) {
  const StatusOr<Manifest> parsed = parse_manifest(text, "fuzz/manifest.json");
  if (!parsed.is_ok()) {
    expect_code(parsed.status(), {StatusCode::kDataLoss}, "parse_manifest");
  } else {
    // What parses must print and parse back to the same manifest.
    const std::string printed = manifest_to_string(parsed.value());
    const StatusOr<Manifest> again = parse_manifest(printed, "fuzz/printed.json");
    expect(again.is_ok(), "a parsed manifest does not parse back: " + again.status().to_string());
    expect(manifest_to_string(again.value()) == printed, "manifest round trip is not stable");
  }
  // The same bytes as a step directory name (CheckpointDirectory's other untrusted input).
  if (const auto step = parse_step_dir_name(text)) {
    expect(*step >= 0 && step_dir_name(*step) == text, "parse_step_dir_name accepted " + text);
  }
}

// ---- mode kShardInfo ---------------------------------------------------------------------

void fuzz_shard_info(const std::string& text) {
  const nlohmann::json json = parse_bounded(text);
  if (json.is_discarded()) return;
  const StatusOr<ShardInfo> info = shard_info_from_json(json);
  if (!info.is_ok()) {
    expect_code(info.status(), {StatusCode::kDataLoss}, "shard_info_from_json");
    return;
  }
  const std::string printed = dump(to_json(info.value()));
  const StatusOr<ShardInfo> again = shard_info_from_json(nlohmann::json::parse(printed));
  expect(again.is_ok(), "a parsed ShardInfo does not parse back: " + again.status().to_string());
  expect(dump(to_json(again.value())) == printed, "ShardInfo round trip is not stable");
}

// ---- modes kRawCheckpoint and kSealedCheckpoint ------------------------------------------

struct CheckpointInput {
  std::string manifest;
  std::vector<std::string_view> shards;
};

CheckpointInput split(std::string_view payload) {
  CheckpointInput input;
  std::size_t cut = payload.find(kShardSeparator);
  input.manifest = std::string(payload.substr(0, cut));
  while (cut != std::string_view::npos) {
    const std::size_t start = cut + kShardSeparator.size();
    cut = input.shards.size() + 1 < kMaxShards ? payload.find(kShardSeparator, start) : std::string_view::npos;
    const std::size_t length = cut == std::string_view::npos ? cut : cut - start;
    input.shards.push_back(payload.substr(start, length));
  }
  return input;
}

// The name shard i is written under: the one manifest lists at shards[i] when it is usable as
// a file name in the scratch directory (so mutated names still find their bytes), else the
// canonical name.
std::string shard_name(const nlohmann::json& manifest, std::size_t i, std::size_t count) {
  if (manifest.is_object()) {
    const auto shards = manifest.find("shards");
    if (shards != manifest.end() && shards->is_array() && i < shards->size()) {
      const nlohmann::json& entry = (*shards)[i];
      if (entry.is_object()) {
        const auto file = entry.find("file");
        if (file != entry.end() && file->is_string()) {
          const std::string& name = file->get_ref<const std::string&>();
          if (!name.empty() && name.size() < 200 && name != "." && name != ".." && name != kManifestFile &&
              name.find('/') == std::string::npos && name.find('\0') == std::string::npos) {
            return name;
          }
        }
      }
    }
  }
  return shard_file_name(static_cast<int>(i), static_cast<int>(count));
}

// Makes the manifest's size and whole-file checksum of each shard agree with the fuzzed bytes.
// Per-tensor checksums are left alone: comparing them is the last step of read(), so fixing
// them up would reach no further code.
std::string seal(nlohmann::json manifest, const std::vector<std::string_view>& shards) {
  const auto listed = manifest.find("shards");
  if (listed == manifest.end() || !listed->is_array()) return dump(manifest);
  for (std::size_t i = 0; i < listed->size() && i < shards.size(); ++i) {
    nlohmann::json& entry = (*listed)[i];
    if (!entry.is_object()) continue;
    entry["bytes"] = shards[i].size();
    entry["checksum"] = checksum_hex(xxh3_64(shards[i].data(), shards[i].size()));
  }
  // The manifest's own checksum too, when it has one: otherwise every edit of a manifest with
  // offsets stops at open().
  if (manifest.contains("content_checksum")) seal_manifest(manifest);
  return dump(manifest);
}

void check_read(const CheckpointReader& reader, const std::string& name, const IndexEntry& entry, bool all_verified) {
  expect(reader.contains(name), "contains() denies an indexed tensor: " + name);
  const StatusOr<TensorData> data = reader.read(name);
  if (!data.is_ok()) {
    expect_code(data.status(), {StatusCode::kDataLoss}, "read('" + name + "')");
    expect(!all_verified, "verify_all() passed but read('" + name + "') failed: " + data.status().to_string());
    return;
  }
  const TensorData& t = data.value();
  expect(t.dtype == entry.dtype && t.shape == entry.shape, "read('" + name + "'): wrong dtype or shape");
  expect(t.bytes.size() == entry.nbytes, "read('" + name + "'): wrong byte count");
  expect(xxh3_64(t.bytes.data(), t.bytes.size()) == entry.checksum,
         "read('" + name + "') returned bytes that do not match the manifest checksum");
}

// Whether libhdf5 survives, on its own, the calls the reader is about to make (only sealed
// inputs can hand HDF5 damaged files: elsewhere the whole-file checksum stops them).
bool hdf5_survives(const fs::path& step, const std::string& manifest_text, std::string_view whole) {
  const StatusOr<Manifest> manifest = parse_manifest(manifest_text, "probe");
  if (!manifest.is_ok()) return true;  // the reader stops before HDF5
  for (const ShardSummary& shard : manifest.value().shards) {
    std::error_code ec;
    if (fs::file_size(step / shard.file, ec) != shard.bytes || ec) return true;  // ditto
  }
  const ProbeResult result = probe_hdf5(step, manifest.value());
  if (result == ProbeResult::kSurvived) return true;
  skipped_inputs().add(result, whole);
  return false;
}

// `whole` is the fuzz input (saved when HDF5 crashes on it), `payload` its part after the mode.
void fuzz_checkpoint(std::string_view whole, std::string_view payload, bool sealed) {
  CheckpointInput input = split(payload);
  const nlohmann::json json = parse_bounded(input.manifest);
  if (sealed && json.is_object()) input.manifest = seal(json, input.shards);

  const fs::path& step = fresh_step_dir();
  write_file(step / kManifestFile, input.manifest);
  for (std::size_t i = 0; i < input.shards.size(); ++i) {
    write_file(step / shard_name(json, i, input.shards.size()), input.shards[i]);
  }
  // TENAX_FUZZ_NO_PROBE=1 (for triage): give every input to the reader, as production would.
  static const bool probe = std::getenv("TENAX_FUZZ_NO_PROBE") == nullptr;
  if (sealed && probe && !hdf5_survives(step, input.manifest, whole)) return;

  const StatusOr<CheckpointReader> opened = CheckpointReader::open(step);
  if (!opened.is_ok()) {
    expect_code(opened.status(), {StatusCode::kDataLoss}, "CheckpointReader::open");
    return;
  }
  const CheckpointReader& reader = opened.value();
  const Status all = reader.verify_all();
  if (!all.is_ok()) expect_code(all, {StatusCode::kDataLoss}, "verify_all");
  for (const auto& [name, entry] : reader.manifest().tensors) {
    check_read(reader, name, entry, all.is_ok());
  }
  // The resume path: every tensor at once, each shard streamed and checked whole.
  std::vector<std::vector<std::uint8_t>> buffers;
  std::vector<ReadTarget> targets;
  for (const auto& [name, entry] : reader.manifest().tensors) {
    if (entry.nbytes > (std::uint64_t{64} << 20)) return;  // a fuzzed size, not worth allocating
    buffers.emplace_back(entry.nbytes);
    targets.push_back({name, buffers.back().data(), buffers.back().size()});
  }
  const Status together = reader.read_all_into(targets);
  if (!together.is_ok()) {
    expect_code(together, {StatusCode::kDataLoss}, "read_all_into");
    expect(!all.is_ok(), "verify_all() passed but read_all_into failed: " + together.to_string());
  }
  const std::string unknown = "no/such tensor";
  if (!reader.contains(unknown)) {
    expect_code(reader.read(unknown).status(), {StatusCode::kNotFound}, "read(unknown)");
  }
}

}  // namespace
}  // namespace tenax::storage::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tenax::storage::fuzz;
  if (size == 0) return 0;
  const std::string_view whole(reinterpret_cast<const char*>(data), size);
  const std::string_view payload = whole.substr(1);
  switch (static_cast<FuzzMode>(data[0] % kModeCount)) {
    case FuzzMode::kManifest: fuzz_manifest(std::string(payload)); break;
    case FuzzMode::kShardInfo: fuzz_shard_info(std::string(payload)); break;
    case FuzzMode::kRawCheckpoint: fuzz_checkpoint(whole, payload, /*sealed=*/false); break;
    case FuzzMode::kSealedCheckpoint: fuzz_checkpoint(whole, payload, /*sealed=*/true); break;
  }
  return 0;
}
