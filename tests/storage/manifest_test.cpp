#include "tenax/storage/manifest.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "tenax/core/error.h"

namespace tenax::storage {
namespace {

IndexEntry entry(const std::string& name, DType dtype, std::vector<std::int64_t> shape, std::uint64_t nbytes,
                 std::uint64_t checksum) {
  return IndexEntry{name, "", dtype, std::move(shape), checksum, nbytes, std::nullopt};
}

std::vector<ShardInfo> two_shards() {
  ShardInfo s0{"shard-00000-of-00002.h5",
               4096,
               0x0123456789abcdefULL,
               {entry("model/w", DType::kFloat32, {2, 3}, 24, 11), entry("optim/w/step", DType::kInt64, {}, 8, 12)}};
  ShardInfo s1{"shard-00001-of-00002.h5",
               2048,
               0xfedcba9876543210ULL,
               {entry("model/b", DType::kBFloat16, {3}, 6, 13), entry("rng/rank1/cpu", DType::kUInt8, {0}, 0, 14)}};
  return {s0, s1};
}

nlohmann::json valid_json() {
  Manifest m = make_manifest(500, 2, 3, two_shards());
  return nlohmann::json::parse(manifest_to_string(m));
}

Status parse_json(const nlohmann::json& j) {
  return parse_manifest(j.dump(), "ckpt/step-000000500/manifest.json").status();
}

TEST(StorageManifest, RoundTrips) {
  Manifest m = make_manifest(500, 2, 3, two_shards());
  m.trainer_state = {{"global_step", 500}, {"best_metric", 0.25}};
  m.arguments = {{"learning_rate", 5e-5}, {"output_dir", "/tmp/run"}};
  EXPECT_EQ(m.world_size, 2);
  ASSERT_EQ(m.tensors.size(), 4u);
  EXPECT_EQ(m.tensors.at("model/b").shard, "shard-00001-of-00002.h5");

  const std::string text = manifest_to_string(m);
  EXPECT_NE(text.find("\"0123456789abcdef\""), std::string::npos) << text;
  auto back = parse_manifest(text, "where");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  const Manifest& b = back.value();
  EXPECT_EQ(b.format_version, 1);
  EXPECT_EQ(b.step, 500);
  EXPECT_EQ(b.epoch, 2);
  EXPECT_EQ(b.generation, 3);
  EXPECT_EQ(b.world_size, 2);
  ASSERT_EQ(b.shards.size(), 2u);
  EXPECT_EQ(b.shards[1].file, "shard-00001-of-00002.h5");
  EXPECT_EQ(b.shards[1].bytes, 2048u);
  EXPECT_EQ(b.shards[1].checksum, 0xfedcba9876543210ULL);
  ASSERT_EQ(b.tensors.size(), 4u);
  const IndexEntry& w = b.tensors.at("model/w");
  EXPECT_EQ(w.name, "model/w");
  EXPECT_EQ(w.shard, "shard-00000-of-00002.h5");
  EXPECT_EQ(w.dtype, DType::kFloat32);
  EXPECT_EQ(w.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(w.nbytes, 24u);
  EXPECT_EQ(w.checksum, 11u);
  EXPECT_EQ(b.tensors.at("optim/w/step").shape, std::vector<std::int64_t>{});
  EXPECT_EQ(b.trainer_state, m.trainer_state);
  EXPECT_EQ(b.arguments, m.arguments);
}

TEST(StorageManifest, DuplicateTensorAcrossShardsThrows) {
  auto shards = two_shards();
  shards[1].tensors.push_back(shards[0].tensors[0]);
  EXPECT_THROW(make_manifest(1, 0, 0, shards), StorageError);
}

TEST(StorageManifest, RejectsNewerFormatVersion) {
  nlohmann::json j = valid_json();
  j["format_version"] = 2;
  const Status s = parse_json(j);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("newer Tenax"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ckpt/step-000000500/manifest.json"), std::string::npos) << s.message();
  j["format_version"] = 0;
  EXPECT_FALSE(parse_json(j).is_ok());
  j["format_version"] = "1";
  EXPECT_FALSE(parse_json(j).is_ok());
}

TEST(StorageManifest, RejectsEachMissingKey) {
  const nlohmann::json good = valid_json();
  ASSERT_TRUE(parse_json(good).is_ok());
  for (const auto& item : good.items()) {
    // Without its checksum a manifest with offsets is refused (tested below); without
    // offsets it is one written before the checksum existed, and loads.
    if (item.key() == "content_checksum") continue;
    nlohmann::json j = good;
    j.erase(item.key());
    const Status s = parse_json(j);
    ASSERT_FALSE(s.is_ok()) << item.key();
    EXPECT_EQ(s.code(), StatusCode::kDataLoss);
    EXPECT_NE(s.message().find(item.key()), std::string::npos) << s.message();
  }
  for (const char* key : {"shard", "dtype", "shape", "nbytes", "checksum"}) {
    nlohmann::json j = good;
    j["tensors"]["model/w"].erase(key);
    const Status s = parse_json(j);
    ASSERT_FALSE(s.is_ok()) << key;
    EXPECT_NE(s.message().find(key), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("model/w"), std::string::npos) << s.message();
  }
}

TEST(StorageManifest, ContentChecksumCoversEveryField) {
  std::vector<ShardInfo> shards = two_shards();
  shards[0].tensors[0].offset = 800;
  const nlohmann::json good = nlohmann::json::parse(manifest_to_string(make_manifest(500, 2, 3, shards)));
  ASSERT_TRUE(good.contains("content_checksum"));
  ASSERT_TRUE(parse_json(good).is_ok());
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> edits = {
      {"offset", [](nlohmann::json& j) { j["tensors"]["model/w"]["offset"] = 804; }},
      {"dtype", [](nlohmann::json& j) { j["tensors"]["model/b"]["dtype"] = "float16"; }},
      {"shape",
       [](nlohmann::json& j) {
         j["tensors"]["model/w"]["shape"] = {3, 2};
       }},
      {"step", [](nlohmann::json& j) { j["step"] = 501; }},
      {"trainer_state", [](nlohmann::json& j) { j["trainer_state"]["x"] = 1; }},
  };
  for (const auto& [what, edit] : edits) {
    nlohmann::json j = good;
    edit(j);
    const Status s = parse_json(j);
    ASSERT_FALSE(s.is_ok()) << what;
    EXPECT_EQ(s.code(), StatusCode::kDataLoss);
    EXPECT_NE(s.message().find("content_checksum"), std::string::npos) << s.message();
    seal_manifest(j);  // the same edit, sealed, parses: the checksum is what refused it
    EXPECT_TRUE(parse_json(j).is_ok()) << what << ": " << parse_json(j).to_string();
  }
  nlohmann::json unsealed = good;
  unsealed.erase("content_checksum");
  const Status s = parse_json(unsealed);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("offsets"), std::string::npos) << s.message();
}

TEST(StorageManifest, RejectsWrongTypesAndInconsistencies) {
  const nlohmann::json good = valid_json();
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> edits = {
      {"step as string", [](nlohmann::json& j) { j["step"] = "500"; }},
      {"step as float", [](nlohmann::json& j) { j["step"] = 500.5; }},
      {"negative step", [](nlohmann::json& j) { j["step"] = -1; }},
      {"negative bytes", [](nlohmann::json& j) { j["shards"][0]["bytes"] = -5; }},
      {"world size mismatch", [](nlohmann::json& j) { j["world_size"] = 3; }},
      {"zero world", [](nlohmann::json& j) { j["world_size"] = 0; }},
      {"checksum not hex", [](nlohmann::json& j) { j["shards"][0]["checksum"] = "0123456789abcdeg"; }},
      {"checksum as number", [](nlohmann::json& j) { j["shards"][0]["checksum"] = 5; }},
      {"unknown dtype", [](nlohmann::json& j) { j["tensors"]["model/w"]["dtype"] = "complex64"; }},
      {"shape vs nbytes",
       [](nlohmann::json& j) {
         j["tensors"]["model/w"]["shape"] = {3, 3};
       }},
      {"negative dim",
       [](nlohmann::json& j) {
         j["tensors"]["model/w"]["shape"] = {-2, -3};
       }},
      {"huge dims",
       [](nlohmann::json& j) {
         j["tensors"]["model/w"]["shape"] = {4294967296LL, 4294967296LL, 4};
       }},
      {"unknown shard", [](nlohmann::json& j) { j["tensors"]["model/w"]["shard"] = "shard-00009-of-00002.h5"; }},
      {"escaping shard", [](nlohmann::json& j) { j["shards"][0]["file"] = "../evil.h5"; }},
      {"duplicate shard", [](nlohmann::json& j) { j["shards"][1]["file"] = j["shards"][0]["file"]; }},
      {"tensors as array", [](nlohmann::json& j) { j["tensors"] = nlohmann::json::array(); }},
      // Spellings HDF5 resolves to the dataset "model/w": the writer never produces them.
      {"absolute tensor name", [](nlohmann::json& j) { j["tensors"]["/model/w"] = j["tensors"]["model/w"]; }},
      {"dot in tensor name", [](nlohmann::json& j) { j["tensors"]["model/./w"] = j["tensors"]["model/w"]; }},
      {"empty component in tensor name", [](nlohmann::json& j) { j["tensors"]["model//w"] = j["tensors"]["model/w"]; }},
      {"NUL in tensor name",
       [](nlohmann::json& j) { j["tensors"][std::string("model/w\0x", 9)] = j["tensors"]["model/w"]; }},
      {"trainer_state as number", [](nlohmann::json& j) { j["trainer_state"] = 1; }},
      {"wrong format", [](nlohmann::json& j) { j["format"] = "safetensors"; }},
  };
  for (const auto& [what, edit] : edits) {
    nlohmann::json j = good;
    edit(j);
    const Status s = parse_json(j);
    EXPECT_FALSE(s.is_ok()) << what;
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << what;
  }
}

TEST(StorageManifest, RejectsGarbageWithoutCrashing) {
  const std::vector<std::string> garbage = {"",
                                            "{",
                                            "[]",
                                            "null",
                                            "42",
                                            "\"manifest\"",
                                            "{\"format_version\":1}",
                                            std::string("\0\xff\xfe{}", 5),
                                            std::string(100000, '[')};
  for (const std::string& text : garbage) {
    EXPECT_FALSE(parse_manifest(text, "m.json").is_ok()) << text.substr(0, 20);
  }
  // Every truncation of a valid manifest (short of the final newline) is rejected.
  const std::string valid = manifest_to_string(make_manifest(500, 2, 3, two_shards()));
  ASSERT_TRUE(parse_manifest(valid, "m.json").is_ok());
  for (std::size_t n = 0; n + 1 < valid.size(); ++n) {
    ASSERT_FALSE(parse_manifest(valid.substr(0, n), "m.json").is_ok()) << n;
  }
  // Random bytes and random single-byte corruptions must never crash.
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    std::string noise(static_cast<std::size_t>(rng() % 512), '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    (void)parse_manifest(noise, "m.json");
    std::string flipped = valid;
    flipped[rng() % flipped.size()] = static_cast<char>(rng());
    (void)parse_manifest(flipped, "m.json");
  }
}

}  // namespace
}  // namespace tenax::storage
