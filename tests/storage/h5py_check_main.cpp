// Driver of the ctest tests StorageShardsReadableByH5py and StorageH5pyCheckCatchesCorruption:
// writes a real 2-shard checkpoint (float32, float16, bfloat16, int64, uint8 tensors, through
// write_shard + make_manifest + CheckpointDirectory::commit) and the values it wrote, then runs
// h5py_reads_shards.py on it under the given Python.
//
//   storage_h5py_check WORK_DIR PYTHON SCRIPT              exit status of the script (0 = pass)
//   storage_h5py_check WORK_DIR PYTHON SCRIPT --corrupt    flips one byte inside a float32
//       tensor's data first; passes only if the script reports that tensor's xxh3 mismatch and
//       exits 1 (so a check that cannot fail, or a Python without h5py, does not pass)
#include <sys/wait.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/layout.h"
#include "tenax/storage/manifest.h"
#include "tenax/storage/shard_writer.h"
#include "tenax/storage/write_plan.h"

namespace {

namespace fs = std::filesystem;
using tenax::storage::DType;

constexpr const char* kCorruptedTensor = "model/encoder.weight";

struct Tensor {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
  nlohmann::json values;  ///< the values the script must read back (uint8: by checksum only)
};

template <typename T>
Tensor make(std::string name, DType dtype, std::vector<std::int64_t> shape, const std::vector<T>& values) {
  Tensor t{std::move(name), dtype, std::move(shape), {}, values};
  t.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// IEEE half bits of a small integer-valued float (exact for |v| < 2048).
std::uint16_t half_bits(float v) {
  if (v == 0.0f) return 0;
  const std::uint16_t sign = v < 0 ? 0x8000 : 0;
  float a = std::fabs(v);
  int exponent = 0;
  while (a >= 2.0f) a /= 2.0f, ++exponent;
  const auto mantissa = static_cast<std::uint16_t>(std::lround((a - 1.0f) * 1024.0f));
  return static_cast<std::uint16_t>(sign | ((exponent + 15) << 10) | mantissa);
}

std::uint16_t bf16_bits(float v) {  // exact for the values used: upper half of the float bits
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<std::uint16_t>(bits >> 16);
}

std::vector<Tensor> make_tensors() {
  std::vector<float> weight(64 * 32), bias(32), halves(8 * 4), brains(16);
  for (std::size_t i = 0; i < weight.size(); ++i) weight[i] = static_cast<float>(i % 97) * 0.5f - 20.0f;
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.125f * static_cast<float>(i) - 1.0f;
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<float>(i) - 16.0f;
  for (std::size_t i = 0; i < brains.size(); ++i)
    brains[i] = std::ldexp(1.5f, static_cast<int>(i) - 8) * (i % 2 ? -1 : 1);
  std::vector<std::uint16_t> half_raw, bf16_raw;
  for (float v : halves) half_raw.push_back(half_bits(v));
  for (float v : brains) bf16_raw.push_back(bf16_bits(v));
  std::vector<std::uint8_t> rng(300);
  for (std::size_t i = 0; i < rng.size(); ++i) rng[i] = static_cast<std::uint8_t>(i * 7 + 3);
  const std::string config = R"({"model_type": "bert", "hidden_size": 32})";

  std::vector<Tensor> tensors;
  tensors.push_back(make(kCorruptedTensor, DType::kFloat32, {64, 32}, weight));
  tensors.push_back(make("model/encoder.bias", DType::kFloat32, {32}, bias));
  tensors.push_back(make("model/empty", DType::kFloat32, {0, 4}, std::vector<float>{}));
  Tensor f16 = make("model/emb.fp16", DType::kFloat16, {8, 4}, half_raw);
  f16.values = halves;
  tensors.push_back(std::move(f16));
  Tensor bf16 = make("model/emb.bf16", DType::kBFloat16, {16}, bf16_raw);
  bf16.values = brains;
  tensors.push_back(std::move(bf16));
  tensors.push_back(make("optim/encoder.weight/step", DType::kInt64, {}, std::vector<std::int64_t>{1234}));
  tensors.push_back(make("sampler", DType::kInt64, {3}, std::vector<std::int64_t>{-7, 1LL << 40, -(1LL << 62)}));
  tensors.push_back(make("rng/rank0/cpu", DType::kUInt8, {300}, rng));
  tensors.push_back(make("files/config.json", DType::kUInt8, {static_cast<std::int64_t>(config.size())},
                         std::vector<std::uint8_t>(config.begin(), config.end())));
  return tensors;
}

// Writes the checkpoint under work/checkpoints; returns its step directory.
fs::path write_checkpoint(const fs::path& work, const std::vector<Tensor>& tensors) {
  constexpr int kWorld = 2;
  tenax::storage::CheckpointDirectory dir(work / "checkpoints");
  const fs::path tmp = dir.prepare_tmp(/*step=*/100, /*generation=*/0);
  std::vector<std::size_t> sizes;
  for (const auto& t : tensors) sizes.push_back(t.bytes.size());
  const std::vector<int> owner = tenax::storage::plan_writes(sizes, kWorld);
  std::vector<tenax::storage::ShardInfo> infos;
  for (int rank = 0; rank < kWorld; ++rank) {
    std::vector<tenax::storage::TensorRef> mine;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (owner[i] != rank) continue;
      const Tensor& t = tensors[i];
      mine.push_back({t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
    }
    auto info = tenax::storage::write_shard(tmp / tenax::storage::shard_file_name(rank, kWorld), mine);
    if (!info.is_ok()) throw tenax::Error(info.status().to_string());
    infos.push_back(info.value());
  }
  tenax::storage::Manifest manifest = tenax::storage::make_manifest(100, 1, 0, infos);
  manifest.trainer_state = {{"global_step", 100}};
  const tenax::Status committed = dir.commit(tmp, manifest);
  if (!committed.is_ok()) throw tenax::Error(committed.to_string());
  return dir.step_dir(100);
}

// Flips one byte in the middle of `t`'s data inside its shard.
void corrupt(const fs::path& step_dir, const Tensor& t) {
  const nlohmann::json manifest = nlohmann::json::parse(tenax::files::read_all(step_dir / "manifest.json"));
  const fs::path shard = step_dir / manifest["tensors"][t.name]["shard"].get<std::string>();
  std::string bytes = tenax::files::read_all(shard);
  const std::size_t at = bytes.find(std::string(t.bytes.begin(), t.bytes.end()));
  if (at == std::string::npos) throw tenax::Error("tensor data not found in " + shard.string());
  bytes[at + t.bytes.size() / 2] ^= 0x40;
  tenax::files::atomic_write(shard, bytes);
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a command line; returns its exit code (-1 if it did not exit) and its output.
int run(const std::string& command, std::string& output) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const bool corrupt_first = argc == 5 && std::string(argv[4]) == "--corrupt";
  if (argc != 4 && !corrupt_first) {
    std::cerr << "usage: storage_h5py_check WORK_DIR PYTHON SCRIPT [--corrupt]\n";
    return 2;
  }
  try {
    const fs::path work = argv[1];
    fs::remove_all(work);
    fs::create_directories(work);
    const std::vector<Tensor> tensors = make_tensors();
    const fs::path step_dir = write_checkpoint(work, tensors);

    nlohmann::json expected = {{"values", nlohmann::json::object()}};
    for (const Tensor& t : tensors) {
      if (!t.values.is_null() && t.dtype != DType::kUInt8) expected["values"][t.name] = t.values;
    }
    const fs::path expected_path = work / "expected.json";
    tenax::files::atomic_write(expected_path, expected.dump(2));
    if (corrupt_first) corrupt(step_dir, tensors.front());

    std::string output;
    const int code = run(
        quote(argv[2]) + " " + quote(argv[3]) + " " + quote(step_dir.string()) + " " + quote(expected_path.string()),
        output);
    std::cout << output;
    if (!corrupt_first) return code;
    const bool caught = code == 1 && output.find(std::string("MISMATCH ") + kCorruptedTensor) != std::string::npos &&
                        output.find("xxh3 mismatch") != std::string::npos;
    std::cout << (caught
                      ? "corruption caught, as it must be\n"
                      : "FAIL: the script did not report the corrupted tensor (exit " + std::to_string(code) + ")\n");
    return caught ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "storage_h5py_check: " << e.what() << "\n";
    return 1;
  }
}
