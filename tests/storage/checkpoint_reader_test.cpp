#include "tenax/storage/checkpoint_reader.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <thread>

#include "storage/storage_test_util.h"
#include "tenax/core/checksum.h"

namespace tenax::storage {
namespace {

namespace fs = std::filesystem;
using testing::OwnedTensor;
using testing::pattern_tensor;

class StorageReader : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    tensors_ = {
        pattern_tensor("model/big.weight", DType::kFloat32, {1024, 256}, 1),  // 1 MiB
        pattern_tensor("model/small.bias", DType::kFloat32, {256}, 2),
        pattern_tensor("model/emb.bf16", DType::kBFloat16, {4, 8}, 3),
        pattern_tensor("optim/big.weight/step", DType::kInt64, {}, 4),
        pattern_tensor("rng/rank1/cpu", DType::kUInt8, {64}, 5),
    };
    step_ = testing::write_checkpoint(dir_ / "checkpoints", tensors_, /*world=*/2);
  }

  nlohmann::json manifest_json() const { return nlohmann::json::parse(testing::read_file(step_ / "manifest.json")); }
  // Writes an edited manifest, sealed (its content_checksum matches the edit) unless asked
  // not to: a sealed edit stands for a writer bug, an unsealed one for damage after the commit.
  void write_manifest(nlohmann::json j, bool seal = true) const {
    if (seal) seal_manifest(j);
    files::atomic_write(step_ / "manifest.json", j.dump(2));
  }
  std::string shard_of(const std::string& tensor) const {
    return manifest_json()["tensors"][tensor]["shard"].get<std::string>();
  }
  // Makes the manifest's whole-file checksum agree with a (corrupted) shard, so that the
  // per-tensor checks are the ones that must catch the damage.
  void reseal_shard(const std::string& file) const {
    nlohmann::json j = manifest_json();
    const std::string bytes = testing::read_file(step_ / file);
    for (auto& s : j["shards"]) {
      if (s["file"] == file) s["checksum"] = checksum_hex(xxh3_64(bytes.data(), bytes.size()));
    }
    write_manifest(j);
  }
  // Flips one byte in the middle of a tensor's data inside its shard; returns the shard name.
  std::string flip_inside(const OwnedTensor& t) const {
    const std::string file = shard_of(t.name);
    std::string bytes = testing::read_file(step_ / file);
    const std::string head(reinterpret_cast<const char*>(t.bytes.data()), 64);
    const std::size_t at = bytes.find(head);
    EXPECT_NE(at, std::string::npos) << "tensor data not found in " << file;
    EXPECT_EQ(bytes.find(head, at + 1), std::string::npos) << "tensor data found twice";
    bytes[at + t.bytes.size() / 2] ^= 0x10;
    testing::write_file(step_ / file, bytes);
    return file;
  }

  std::vector<OwnedTensor> tensors_;
  fs::path step_;
};

TEST_F(StorageReader, ReadsEverythingBack) {
  auto reader = CheckpointReader::open(step_);
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  const CheckpointReader r = std::move(reader).value();  // movable
  EXPECT_EQ(r.manifest().world_size, 2);
  EXPECT_EQ(r.manifest().tensors.size(), tensors_.size());
  ASSERT_TRUE(r.verify_all().is_ok()) << r.verify_all().to_string();
  for (const auto& t : tensors_) {
    EXPECT_TRUE(r.contains(t.name));
    auto data = r.read(t.name);
    ASSERT_TRUE(data.is_ok()) << data.status().to_string();
    EXPECT_EQ(data.value().bytes, t.bytes) << t.name;
  }
  EXPECT_FALSE(r.contains("model/missing"));
  EXPECT_EQ(r.read("model/missing").status().code(), StatusCode::kNotFound);
}

TEST_F(StorageReader, ConcurrentReadsAgree) {
  auto reader = CheckpointReader::open(step_);
  ASSERT_TRUE(reader.is_ok());
  std::vector<int> ok(tensors_.size(), 0);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    threads.emplace_back([&, i] {
      auto data = reader.value().read(tensors_[i].name);
      ok[i] = data.is_ok() && data.value().bytes == tensors_[i].bytes;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, std::vector<int>(tensors_.size(), 1));
}

TEST_F(StorageReader, MissingManifestIsNotFound) {
  fs::remove(step_ / "manifest.json");
  EXPECT_EQ(CheckpointReader::open(step_).status().code(), StatusCode::kNotFound);
}

TEST_F(StorageReader, TruncatedShardFailsToOpen) {
  const std::string file = shard_of("model/big.weight");
  fs::resize_file(step_ / file, fs::file_size(step_ / file) - 100);
  auto reader = CheckpointReader::open(step_);
  ASSERT_FALSE(reader.is_ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(reader.status().message().find(file), std::string::npos) << reader.status().message();
}

TEST_F(StorageReader, DeletedShardFailsToOpen) {
  const std::string file = shard_of("model/emb.bf16");
  fs::remove(step_ / file);
  auto reader = CheckpointReader::open(step_);
  ASSERT_FALSE(reader.is_ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(reader.status().message().find(file), std::string::npos) << reader.status().message();
}

TEST_F(StorageReader, FlippedByteIsCaughtByTheFileChecksum) {
  const std::string file = flip_inside(tensors_[0]);
  auto reader = CheckpointReader::open(step_);
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();  // same size: open cannot tell
  const Status all = reader.value().verify_all();
  EXPECT_EQ(all.code(), StatusCode::kDataLoss);
  EXPECT_NE(all.message().find(file), std::string::npos) << all.message();
  auto data = reader.value().read(tensors_[0].name);
  EXPECT_EQ(data.status().code(), StatusCode::kDataLoss);
}

TEST_F(StorageReader, FlippedByteIsCaughtByTheTensorChecksum) {
  const std::string file = flip_inside(tensors_[0]);
  reseal_shard(file);
  auto reader = CheckpointReader::open(step_);
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  auto data = reader.value().read(tensors_[0].name);
  ASSERT_FALSE(data.is_ok());
  EXPECT_EQ(data.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(data.status().message().find(file), std::string::npos) << data.status().message();
  EXPECT_NE(data.status().message().find("model/big.weight"), std::string::npos);
  EXPECT_NE(data.status().message().find("checksum"), std::string::npos);
  EXPECT_EQ(reader.value().verify_all().code(), StatusCode::kDataLoss);
  // Other tensors in the same file are still fine.
  EXPECT_TRUE(reader.value().read("model/small.bias").is_ok() || shard_of("model/small.bias") != file);
}

TEST_F(StorageReader, EditedManifestFailsToOpen) {
  nlohmann::json j = manifest_json();
  j["tensors"]["model/emb.bf16"]["dtype"] = "float16";  // same size, different HDF5 type
  write_manifest(j, /*seal=*/false);
  auto reader = CheckpointReader::open(step_);
  ASSERT_FALSE(reader.is_ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(reader.status().message().find("content_checksum"), std::string::npos) << reader.status().message();
  EXPECT_NE(reader.status().message().find("manifest.json"), std::string::npos) << reader.status().message();
}

// A manifest whose own checksum matches but that lies about a tensor (a writer bug): the
// direct read cannot tell, verify_all (what `tenax ckpt verify` runs) does, through HDF5.
TEST_F(StorageReader, ManifestWithWrongDtypeIsCaughtByVerify) {
  nlohmann::json j = manifest_json();
  j["tensors"]["model/emb.bf16"]["dtype"] = "float16";
  write_manifest(j);
  auto reader = CheckpointReader::open(step_);
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  const Status s = reader.value().verify_all();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("model/emb.bf16"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("float16"), std::string::npos) << s.message();
}

TEST_F(StorageReader, ManifestWithWrongShapeIsCaughtByVerify) {
  nlohmann::json j = manifest_json();
  j["tensors"]["model/emb.bf16"]["shape"] = {8, 4};
  write_manifest(j);
  auto reader = CheckpointReader::open(step_);
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  const Status s = reader.value().verify_all();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("shape"), std::string::npos) << s.message();
}

TEST_F(StorageReader, ManifestWithWrongOffsetIsCaughtByTheTensorChecksum) {
  nlohmann::json j = manifest_json();
  auto& entry = j["tensors"]["model/big.weight"];
  entry["offset"] = entry["offset"].get<std::uint64_t>() + 4;
  write_manifest(j);
  auto reader = CheckpointReader::open(step_);
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  auto data = reader.value().read("model/big.weight");
  ASSERT_FALSE(data.is_ok());
  EXPECT_EQ(data.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(data.status().message().find("checksum"), std::string::npos) << data.status().message();
  const Status verified = reader.value().verify_all();
  EXPECT_NE(verified.message().find("offset"), std::string::npos) << verified.to_string();
}

TEST_F(StorageReader, OffsetBeyondTheShardFailsToOpen) {
  nlohmann::json j = manifest_json();
  j["tensors"]["model/big.weight"]["offset"] = std::uint64_t{1} << 62;
  write_manifest(j);
  auto reader = CheckpointReader::open(step_);
  ASSERT_FALSE(reader.is_ok());
  EXPECT_NE(reader.status().message().find("beyond the end"), std::string::npos) << reader.status().message();
}

// What a resume calls: every shard streamed once, whole-file and per-tensor checksums both.
TEST_F(StorageReader, ReadAllIntoReadsEveryTensorAndChecksTheWholeFile) {
  auto reader = CheckpointReader::open(step_);
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  std::vector<std::vector<std::uint8_t>> out(tensors_.size());
  std::vector<ReadTarget> targets;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    out[i].resize(tensors_[i].bytes.size());
    targets.push_back({tensors_[i].name, out[i].data(), out[i].size()});
  }
  ASSERT_TRUE(reader.value().read_all_into(targets).is_ok());
  for (std::size_t i = 0; i < tensors_.size(); ++i) EXPECT_EQ(out[i], tensors_[i].bytes) << tensors_[i].name;

  // A flipped byte in HDF5's bookkeeping (no tensor's data) still fails the load.
  const std::string file = shard_of("model/big.weight");
  std::string bytes = testing::read_file(step_ / file);
  bytes[100] = static_cast<char>(bytes[100] ^ 0x01);  // inside the superblock / root group
  testing::write_file(step_ / file, bytes);
  auto damaged = CheckpointReader::open(step_);
  ASSERT_TRUE(damaged.is_ok());
  const Status s = damaged.value().read_all_into(targets);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("file checksum"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(file), std::string::npos) << s.message();
}

// A load of a shard longer than one of the reader's 16 MiB reads (a read boundary inside a
// tensor, sizes that end mid-block, one tensor not asked for), written on the file system at
// `dir`: every byte lands where it belongs; a shard cut short under the reader is data loss
// naming the byte.
void expect_large_load_exact(const fs::path& dir) {
  const std::vector<OwnedTensor> tensors = {
      pattern_tensor("model/a", DType::kFloat32, {3, 1000, 1000}, 1),  // 12 MB
      pattern_tensor("model/b", DType::kUInt8, {5 * 4096 + 77}, 2),
      pattern_tensor("model/c", DType::kFloat32, {1001, 2003}, 3),  // 8.02 MB
      pattern_tensor("model/d", DType::kFloat16, {3}, 4),
  };
  const fs::path step = testing::write_checkpoint(dir / "checkpoints", tensors);
  auto reader = CheckpointReader::open(step);
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  std::vector<std::vector<std::uint8_t>> out(tensors.size());
  std::vector<ReadTarget> targets;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (i == 1) continue;  // one tensor not asked for: its bytes are still hashed
    out[i].assign(tensors[i].bytes.size(), 0xAB);
    targets.push_back({tensors[i].name, out[i].data(), out[i].size()});
  }
  const Status loaded = reader.value().read_all_into(targets);
  ASSERT_TRUE(loaded.is_ok()) << loaded.to_string();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (i != 1) {
      EXPECT_EQ(out[i], tensors[i].bytes) << tensors[i].name;
    }
  }

  // Cut short after the open (which checks the size): the load itself must notice.
  const std::string shard = reader.value().manifest().shards.at(0).file;
  const auto full = fs::file_size(step / shard);
  fs::resize_file(step / shard, full - 10000);
  const Status s = reader.value().read_all_into(targets);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("ends at byte " + std::to_string(full - 10000)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
}

TEST_F(StorageReader, LargeTensorsLoadExactlyAcrossChunks) { expect_large_load_exact(dir_); }

TEST(StorageReaderNoDirectIo, AFileSystemWithoutODirectLoadsTheSameBytes) {
  // tmpfs refuses O_DIRECT: the shard was written through the page cache.
  const fs::path shm = "/dev/shm";
  ASSERT_TRUE(fs::is_directory(shm)) << "this test needs a tmpfs at /dev/shm";
  const fs::path dir = shm / ("tenax_storage_reader_no_direct_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  expect_large_load_exact(dir);
  fs::remove_all(dir);
}

// Found by the fuzz target's review (tests/fuzz): HDF5 resolves "/x", "./x", "a//b" and
// "x\0junk" to the dataset "x", so a manifest listing such a name used to read another
// tensor's data under a name that is not in the shard.
TEST_F(StorageReader, ManifestNameAliasingADatasetFailsToOpen) {
  const nlohmann::json original = manifest_json();
  for (const std::string& alias : {std::string("/model/small.bias"), std::string("model/./small.bias"),
                                   std::string("model//small.bias"), std::string("model/small.bias\0junk", 21)}) {
    nlohmann::json j = original;
    j["tensors"][alias] = j["tensors"]["model/small.bias"];
    write_manifest(j);
    auto reader = CheckpointReader::open(step_);
    ASSERT_FALSE(reader.is_ok()) << alias;
    EXPECT_EQ(reader.status().code(), StatusCode::kDataLoss) << alias;
    EXPECT_NE(reader.status().message().find("invalid tensor name"), std::string::npos) << reader.status().message();
  }
}

TEST_F(StorageReader, CorruptManifestFailsToOpen) {
  testing::write_file(step_ / "manifest.json", "{\"format_version\": 1, \"step\": ");
  auto reader = CheckpointReader::open(step_);
  ASSERT_FALSE(reader.is_ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(reader.status().message().find("manifest.json"), std::string::npos);
}

// HDF5 must not crash on hostile bytes anywhere in a shard (metadata included). The manifest is
// resealed after each flip so that HDF5 really parses the damaged file.
TEST_F(StorageReader, FlippedBytesAnywhereNeverCrash) {
  const std::string file = shard_of("rng/rank1/cpu");
  const std::string original = testing::read_file(step_ / file);
  const nlohmann::json manifest = manifest_json();
  int detected = 0;
  int flips = 0;
  for (std::size_t at = 0; at < original.size(); at += 7) {
    std::string bytes = original;
    bytes[at] = static_cast<char>(bytes[at] ^ 0x5a);
    testing::write_file(step_ / file, bytes);
    nlohmann::json resealed = manifest;
    for (auto& s : resealed["shards"]) {
      if (s["file"] == file) s["checksum"] = checksum_hex(xxh3_64(bytes.data(), bytes.size()));
    }
    seal_manifest(resealed);
    testing::write_file(step_ / "manifest.json", resealed.dump());
    auto reader = CheckpointReader::open(step_);
    ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
    ++flips;
    bool ok = true;
    for (const auto& [name, entry] : manifest["tensors"].items()) {
      if (entry["shard"] == file) ok = reader.value().read(name).is_ok() && ok;
    }
    if (!ok) ++detected;
  }
  testing::write_file(step_ / file, original);
  write_manifest(manifest);
  // Most bytes of a small shard are metadata HDF5 reads or tensor data we hash; unused padding
  // may flip unnoticed, which is harmless.
  EXPECT_GT(detected, 0) << "of " << flips;
  auto reader = CheckpointReader::open(step_);
  ASSERT_TRUE(reader.is_ok());
  EXPECT_TRUE(reader.value().verify_all().is_ok());
}

}  // namespace
}  // namespace tenax::storage
