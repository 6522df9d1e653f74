// Writes the seed corpus of the checkpoint reader fuzz target: small checkpoints produced by
// the real writer (write_shard + make_manifest), each encoded in every mode of fuzz_input.h,
// plus a few hand-damaged manifests that stop at different checks of parse_manifest.
//
//   build/tests/fuzz/storage_fuzz_make_corpus tests/fuzz/corpus
//
// HDF5 stores object timestamps, so a regenerated corpus differs byte-wise from the committed
// one; both are valid seeds. Not run by ctest.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "tenax/core/status.h"
#include "tenax/storage/layout.h"
#include "tenax/storage/manifest.h"
#include "tenax/storage/shard_writer.h"
#include "tenax/storage/tensor_bytes.h"
#include "tenax/storage/write_plan.h"

namespace tenax::storage::fuzz {
namespace {

namespace fs = std::filesystem;

struct Tensor {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};

Tensor tensor(std::string name, DType dtype, std::vector<std::int64_t> shape, std::uint32_t seed) {
  std::size_t n = dtype_size(dtype);
  for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  Tensor t{std::move(name), dtype, std::move(shape), std::vector<std::uint8_t>(n)};
  std::uint32_t x = seed * 2654435761u + 12345u;
  for (std::uint8_t& b : t.bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return t;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

struct Written {
  std::string manifest;
  std::vector<std::string> shards;  // file bytes, in rank order
  std::vector<std::string> infos;   // to_json(ShardInfo), in rank order
};

// One checkpoint of `world` shards, written by the real writer into `scratch`.
Written write_checkpoint(const fs::path& scratch, const std::vector<Tensor>& tensors, int world) {
  std::vector<std::size_t> sizes;
  for (const Tensor& t : tensors) sizes.push_back(t.bytes.size());
  const std::vector<int> owner = plan_writes(sizes, world);
  std::vector<ShardInfo> infos;
  Written out;
  for (int r = 0; r < world; ++r) {
    std::vector<TensorRef> mine;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      if (owner[i] == r) mine.push_back(TensorRef{t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
    }
    const fs::path file = scratch / shard_file_name(r, world);
    StatusOr<ShardInfo> info = write_shard(file, mine);
    if (!info.is_ok()) throw std::runtime_error(info.status().to_string());
    out.shards.push_back(read_all(file));
    out.infos.push_back(to_json(info.value()).dump());
    infos.push_back(info.value());
  }
  Manifest manifest = make_manifest(/*step=*/100, /*epoch=*/1, /*generation=*/0, infos);
  manifest.trainer_state = {{"global_step", 100}, {"best_metric", 0.25}};
  manifest.arguments = {{"learning_rate", 1e-4}, {"save_total_limit", 2}};
  out.manifest = manifest_to_string(manifest);
  return out;
}

int run(const fs::path& out_dir) {
  const fs::path scratch = fs::temp_directory_path() / ("tenax-make-corpus-" + std::to_string(::getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  fs::create_directories(out_dir);

  struct Case {
    std::string name;
    std::vector<Tensor> tensors;
    int world;
  };
  const std::vector<Case> cases = {
      {"model",
       {tensor("model/encoder.weight", DType::kFloat32, {4, 3}, 1),
        tensor("model/encoder.bias", DType::kFloat32, {3}, 2),
        tensor("optim/encoder.weight/step", DType::kInt64, {}, 3), tensor("rng/rank0/cpu", DType::kUInt8, {16}, 4)},
       1},
      {"dtypes",
       {tensor("f32", DType::kFloat32, {2, 2}, 5), tensor("f16", DType::kFloat16, {3}, 6),
        tensor("bf16", DType::kBFloat16, {2, 1, 2}, 7), tensor("i64", DType::kInt64, {2}, 8),
        tensor("u8", DType::kUInt8, {5}, 9)},
       1},
      {"world2",
       {tensor("model/a", DType::kFloat32, {8}, 10), tensor("model/b", DType::kBFloat16, {6}, 11),
        tensor("model/c", DType::kUInt8, {3}, 12), tensor("sampler", DType::kInt64, {2}, 13)},
       2},
      {"empty",
       {tensor("model/none", DType::kFloat32, {0}, 14), tensor("model/zero_rows", DType::kInt64, {0, 4}, 15),
        tensor("trainer_state", DType::kUInt8, {1}, 16)},
       1},
      {"deep",
       {tensor("user/a/b/c/d/e/f", DType::kFloat16, {2, 2}, 17), tensor("user/a/b/x", DType::kUInt8, {}, 18)},
       1},
      {"noshard_tensors", {tensor("model/only", DType::kFloat32, {1}, 19)}, 2},
  };

  int files = 0;
  const auto emit = [&](const std::string& name, const std::string& bytes) {
    write(out_dir / name, bytes);
    ++files;
  };
  for (const Case& c : cases) {
    const Written w = write_checkpoint(scratch, c.tensors, c.world);
    emit("manifest-" + c.name, encode_input(FuzzMode::kManifest, w.manifest));
    emit("shardinfo-" + c.name, encode_input(FuzzMode::kShardInfo, w.infos.front()));
    emit("raw-" + c.name, encode_input(FuzzMode::kRawCheckpoint, w.manifest, w.shards));
    emit("sealed-" + c.name, encode_input(FuzzMode::kSealedCheckpoint, w.manifest, w.shards));
  }

  // Manifests damaged by hand, each failing at a different check of parse_manifest.
  const Written base = write_checkpoint(scratch, cases.front().tensors, 1);
  const nlohmann::json good = nlohmann::json::parse(base.manifest);
  const auto damaged = [&](const std::string& name, auto&& edit) {
    nlohmann::json j = good;
    edit(j);
    emit("manifest-bad-" + name, encode_input(FuzzMode::kManifest, j.dump(1)));
  };
  damaged("newer-version", [](nlohmann::json& j) { j["format_version"] = 2; });
  damaged("negative-step", [](nlohmann::json& j) { j["step"] = -1; });
  damaged("world-mismatch", [](nlohmann::json& j) { j["world_size"] = 3; });
  damaged("shard-path", [](nlohmann::json& j) { j["shards"][0]["file"] = "../escape.h5"; });
  damaged("checksum-case", [](nlohmann::json& j) { j["shards"][0]["checksum"] = "ABCDEF0123456789"; });
  damaged("nbytes", [](nlohmann::json& j) { j["tensors"]["model/encoder.bias"]["nbytes"] = 13; });
  damaged("shape-overflow", [](nlohmann::json& j) {
    j["tensors"]["model/encoder.bias"]["shape"] = {4294967296, 4294967296};
  });
  damaged("unknown-shard",
          [](nlohmann::json& j) { j["tensors"]["model/encoder.bias"]["shard"] = "shard-00009-of-00010.h5"; });
  // A checkpoint whose shard bytes are not HDF5 at all, sealed so that HDF5 sees them.
  emit("sealed-not-hdf5", encode_input(FuzzMode::kSealedCheckpoint, base.manifest, {std::string(512, 'x')}));

  fs::remove_all(scratch);
  std::printf("wrote %d corpus files to %s\n", files, out_dir.c_str());
  return 0;
}

}  // namespace
}  // namespace tenax::storage::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output dir>\n", argv[0]);
    return 2;
  }
  try {
    return tenax::storage::fuzz::run(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "storage_fuzz_make_corpus: %s\n", e.what());
    return 1;
  }
}
