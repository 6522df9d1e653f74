#include "tenax/storage/shard_writer.h"

#include <gtest/gtest.h>

#include <cstring>

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
