#include "tenax/storage/shard_writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "storage/storage_test_util.h"
#include "tenax/core/checksum.h"
#include "tenax/storage/checkpoint_reader.h"

namespace tenax::storage {
namespace {

using testing::OwnedTensor;
using testing::pattern_tensor;

class StorageShard : public testing::TempDirTest {};

OwnedTensor bf16_specials() {
  // 1.0, -2.5, +0, -0, +inf, -inf, quiet NaN, smallest subnormal, largest finite, 0x1234.
  const std::vector<std::uint16_t> bits = {0x3f80, 0xc020, 0x0000, 0x8000, 0x7f80,
                                           0xff80, 0x7fc0, 0x0001, 0x7f7f, 0x1234};
  OwnedTensor t{"model/emb.bf16", DType::kBFloat16, {2, 5}, std::vector<std::uint8_t>(bits.size() * 2)};
  std::memcpy(t.bytes.data(), bits.data(), t.bytes.size());
  return t;
}

TEST_F(StorageShard, RoundTripsEveryDtypeScalarAndEmpty) {
  const std::vector<OwnedTensor> tensors = {
      pattern_tensor("model/encoder.layer.0.attention.self.query.weight", DType::kFloat32, {8, 16}, 1),
      pattern_tensor("model/encoder.layer.0.attention.self.query.bias", DType::kFloat16, {16}, 2),
      bf16_specials(),
      pattern_tensor("optim/encoder.layer.0.attention.self.query.weight/step", DType::kInt64, {}, 3),
      pattern_tensor("rng/rank0/cpu", DType::kUInt8, {5056}, 4),
      pattern_tensor("user/empty_rows", DType::kInt64, {0, 3}, 5),
      pattern_tensor("user/empty", DType::kFloat32, {0}, 6),
      pattern_tensor("scalar_f32", DType::kFloat32, {}, 7),
  };
  const auto step = testing::write_checkpoint(dir_ / "checkpoints", tensors);
  auto reader = CheckpointReader::open(step);
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  for (const OwnedTensor& t : tensors) {
    auto data = reader.value().read(t.name);
    ASSERT_TRUE(data.is_ok()) << data.status().to_string();
    EXPECT_EQ(data.value().dtype, t.dtype) << t.name;
    EXPECT_EQ(data.value().shape, t.shape) << t.name;
    EXPECT_EQ(data.value().bytes, t.bytes) << t.name;
  }
  EXPECT_TRUE(reader.value().verify_all().is_ok());
}

TEST_F(StorageShard, InfoDescribesTheFileAndItsTensors) {
  const auto a = pattern_tensor("model/a", DType::kFloat32, {3, 4}, 1);
  const auto b = pattern_tensor("model/sub/b", DType::kUInt8, {7}, 2);
  const auto file = dir_ / "shard-00000-of-00001.h5";
  auto info = write_shard(file, {a.ref(), b.ref()});
  ASSERT_TRUE(info.is_ok()) << info.status().to_string();
  const std::string bytes = testing::read_file(file);
  EXPECT_EQ(info.value().file, "shard-00000-of-00001.h5");
  EXPECT_EQ(info.value().bytes, bytes.size());
  EXPECT_EQ(info.value().checksum, xxh3_64(bytes.data(), bytes.size()));
  ASSERT_EQ(info.value().tensors.size(), 2u);
  const IndexEntry& e = info.value().tensors[1];
  EXPECT_EQ(e.name, "model/sub/b");
  EXPECT_EQ(e.shard, "shard-00000-of-00001.h5");
  EXPECT_EQ(e.dtype, DType::kUInt8);
  EXPECT_EQ(e.shape, (std::vector<std::int64_t>{7}));
  EXPECT_EQ(e.nbytes, 7u);
  EXPECT_EQ(e.checksum, xxh3_64(b.bytes.data(), b.bytes.size()));
}

// Large tensors (several of the writer's 8 MiB O_DIRECT chunks, sizes that end mid-block,
// sources at odd addresses) land byte for byte where the index says, with the index's
// checksums and the whole file's. Run in `dir`; returns the file.
std::filesystem::path expect_large_tensors_round_trip(const std::filesystem::path& dir) {
  std::vector<OwnedTensor> tensors = {
      pattern_tensor("model/big", DType::kFloat32, {5, 1000, 1000}, 1),    // 20 MB: 3 chunks
      pattern_tensor("model/ragged", DType::kUInt8, {3 * 4096 + 123}, 2),  // a partial last block
      pattern_tensor("model/small", DType::kFloat16, {7}, 3),              // under one block
      pattern_tensor("optim/big/exp_avg", DType::kFloat32, {2, 1000, 1001}, 4),
  };
  // An unaligned source: the same bytes, one byte into a larger buffer.
  std::vector<std::uint8_t> shifted(tensors[3].bytes.size() + 1);
  std::memcpy(shifted.data() + 1, tensors[3].bytes.data(), tensors[3].bytes.size());
  std::vector<TensorRef> refs;
  for (const OwnedTensor& t : tensors) refs.push_back(t.ref());
  refs[3].data = shifted.data() + 1;

  const auto file = dir / "shard-00000-of-00001.h5";
  auto info = write_shard(file, refs);
  EXPECT_TRUE(info.is_ok()) << info.status().to_string();
  if (!info.is_ok()) return file;
  const std::string bytes = testing::read_file(file);
  EXPECT_EQ(info.value().bytes, bytes.size());
  EXPECT_EQ(info.value().checksum, xxh3_64(bytes.data(), bytes.size()));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const IndexEntry& e = info.value().tensors[i];
    EXPECT_TRUE(e.offset.has_value()) << e.name;
    if (!e.offset) continue;
    EXPECT_EQ(e.checksum, xxh3_64(tensors[i].bytes.data(), tensors[i].bytes.size())) << e.name;
    EXPECT_EQ(0, std::memcmp(bytes.data() + *e.offset, tensors[i].bytes.data(), tensors[i].bytes.size())) << e.name;
  }
  return file;
}

TEST_F(StorageShard, LargeTensorsRoundTripBitExact) { expect_large_tensors_round_trip(dir_); }

TEST_F(StorageShard, LargeTensorsBypassThePageCache) {
  // O_DIRECT leaves no copy of the bytes in the page cache (a buffered write leaves them all),
  // so the writer's CPU goes to no kernel copy and the fsync has no dirty pages to wait on.
  const OwnedTensor big = pattern_tensor("model/big", DType::kFloat32, {4, 1024, 1024}, 9);
  auto info = write_shard(dir_ / "s.h5", {big.ref()});
  ASSERT_TRUE(info.is_ok()) << info.status().to_string();
  const IndexEntry& e = info.value().tensors[0];
  ASSERT_TRUE(e.offset.has_value());
  EXPECT_EQ(*e.offset % 4096, 0u) << "HDF5 was asked to align large datasets to 4 KiB";
  EXPECT_EQ(testing::resident_pages(dir_ / "s.h5", *e.offset, e.nbytes), 0u)
      << "the tensor's bytes went through the page cache, not O_DIRECT";
  const std::string bytes = testing::read_file(dir_ / "s.h5");
  EXPECT_EQ(0, std::memcmp(bytes.data() + *e.offset, big.bytes.data(), big.bytes.size()));
}

TEST(StorageShardNoDirectIo, AFileSystemWithoutODirectGetsTheSameBytes) {
  // tmpfs refuses O_DIRECT: every byte goes through the page cache instead.
  const std::filesystem::path shm = "/dev/shm";
  ASSERT_TRUE(std::filesystem::is_directory(shm)) << "this test needs a tmpfs at /dev/shm";
  const auto dir = shm / ("tenax_storage_no_direct_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  expect_large_tensors_round_trip(dir);
  std::filesystem::remove_all(dir);
}

TEST_F(StorageShard, EmptyShardIsValid) {
  auto info = write_shard(dir_ / "s.h5", {});
  ASSERT_TRUE(info.is_ok()) << info.status().to_string();
  EXPECT_TRUE(info.value().tensors.empty());
  EXPECT_GT(info.value().bytes, 0u);
}

TEST_F(StorageShard, InfoJsonRoundTripsAndIsStrict) {
  const auto a = pattern_tensor("model/a", DType::kBFloat16, {2, 2}, 1);
  const auto s = pattern_tensor("step", DType::kInt64, {}, 2);
  auto info = write_shard(dir_ / "x.h5", {a.ref(), s.ref()});
  ASSERT_TRUE(info.is_ok()) << info.status().to_string();
  const nlohmann::json wire = nlohmann::json::parse(to_json(info.value()).dump());
  auto back = shard_info_from_json(wire);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back.value().file, info.value().file);
  EXPECT_EQ(back.value().bytes, info.value().bytes);
  EXPECT_EQ(back.value().checksum, info.value().checksum);
  ASSERT_EQ(back.value().tensors.size(), 2u);
  EXPECT_EQ(back.value().tensors[0].name, "model/a");
  EXPECT_EQ(back.value().tensors[0].dtype, DType::kBFloat16);
  EXPECT_EQ(back.value().tensors[1].shape, std::vector<std::int64_t>{});
  EXPECT_EQ(back.value().tensors[1].checksum, info.value().tensors[1].checksum);

  for (const char* key : {"file", "bytes", "checksum", "tensors"}) {
    nlohmann::json broken = wire;
    broken.erase(key);
    auto r = shard_info_from_json(broken);
    ASSERT_FALSE(r.is_ok()) << key;
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
  nlohmann::json broken = wire;
  broken["tensors"][0].erase("checksum");
  EXPECT_FALSE(shard_info_from_json(broken).is_ok());
  broken = wire;
  broken["bytes"] = -1;
  EXPECT_FALSE(shard_info_from_json(broken).is_ok());
  EXPECT_FALSE(shard_info_from_json(nlohmann::json("not an object")).is_ok());
}

TEST_F(StorageShard, RejectsBadTensorsWithoutLeavingAFile) {
  auto t = pattern_tensor("model/a", DType::kFloat32, {4}, 1);
  TensorRef wrong = t.ref();
  wrong.nbytes = 15;
  const auto file = dir_ / "bad.h5";
  auto r = write_shard(file, {wrong});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("model/a"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(file.string()), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(file));

  EXPECT_FALSE(write_shard(file, {t.ref(), t.ref()}).is_ok());  // duplicate name
  for (const char* name : {"", "/abs", "a//b", "a/", "a/../b", "./a"}) {
    TensorRef bad = t.ref();
    bad.name = name;
    EXPECT_FALSE(write_shard(file, {bad}).is_ok()) << name;
  }
  TensorRef negative = t.ref();
  negative.shape = {-4};
  EXPECT_FALSE(write_shard(file, {negative}).is_ok());
  TensorRef null_data = t.ref();
  null_data.data = nullptr;
  EXPECT_FALSE(write_shard(file, {null_data}).is_ok());
  // A dataset name that is also a group name: HDF5 refuses; we report, not crash.
  auto child = pattern_tensor("model/a/child", DType::kFloat32, {1}, 2);
  auto clash = write_shard(file, {t.ref(), child.ref()});
  ASSERT_FALSE(clash.is_ok());
  EXPECT_NE(clash.status().message().find("model/a/child"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST_F(StorageShard, UnwritableLocationIsFailedPrecondition) {
  auto t = pattern_tensor("a", DType::kUInt8, {4}, 1);
  const auto file = dir_ / "no" / "such" / "dir" / "s.h5";
  auto r = write_shard(file, {t.ref()});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find(file.string()), std::string::npos) << r.status().message();
}

TEST_F(StorageShard, H5dumpReadsTheShard) {
  // tools/bootstrap.sh installs hdf5-tools: a missing h5dump is a set-up failure, not a skip.
  ASSERT_EQ(std::system("command -v h5dump > /dev/null 2>&1"), 0) << "h5dump not installed (hdf5-tools)";
  OwnedTensor bf{"model/encoder.layer.0.weight", DType::kBFloat16, {2}, {0x80, 0x3f, 0x20, 0xc0}};
  auto scalar = pattern_tensor("optim/encoder.layer.0.weight/step", DType::kInt64, {}, 1);
  const auto file = dir_ / "shard-00000-of-00001.h5";
  auto info = write_shard(file, {bf.ref(), scalar.ref()});
  ASSERT_TRUE(info.is_ok()) << info.status().to_string();

  const auto [status, out] = testing::run_command("h5dump '" + file.string() + "'");
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("GROUP \"model\""), std::string::npos) << out;
  EXPECT_NE(out.find("DATASET \"encoder.layer.0.weight\""), std::string::npos) << out;
  EXPECT_NE(out.find("DATASET \"step\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"bfloat16\""), std::string::npos) << out;
  EXPECT_NE(out.find(checksum_hex(xxh3_64(bf.bytes.data(), 4))), std::string::npos) << out;
  // h5dump converts the custom 16-bit float to a native float: 1.0 and -2.5.
  EXPECT_NE(out.find("1, -2.5"), std::string::npos) << out;
}

}  // namespace
}  // namespace tenax::storage
