// safetensors: interop with the Python package (goldens in tests/storage/goldens, made by
// make_safetensors_goldens.py), writer → reader round trips, and malformed files.
//
// Python reading our files: WriterMatchesPythonByteForByte shows that our writer produces the
// exact bytes Python's safetensors writes for the golden's tensors (every dtype, a scalar, an
// empty tensor, metadata {"format": "pt"}). Beyond that, checked once by hand with safetensors
// 0.8.0 / numpy 2.4.6 in a venv: safe_open(framework="numpy") and deserialize() read a
// write_safetensors file with the tensors of RoundTripsEveryDtype (non-ASCII name, three
// metadata entries) and the model.safetensors of `tenax ckpt export` with the same names,
// dtypes, shapes and bytes, and Python's serialize() of the latter's tensors gives our bytes.
// (The crate orders a metadata map of two or more entries by hash, so only single-entry
// metadata can be compared byte for byte.) CI needs no Python for these tests.
#include "tenax/storage/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "storage/storage_test_util.h"

namespace tenax::storage {
namespace {

namespace fs = std::filesystem;
using testing::OwnedTensor;
using testing::pattern_tensor;

const fs::path kGoldens = TENAX_STORAGE_GOLDENS_DIR;

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::vector<std::uint8_t> to_bytes(const std::string& s) { return {s.begin(), s.end()}; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The golden's tensors, rebuilt from tiny.json.
std::vector<OwnedTensor> golden_tensors(const nlohmann::json& expected) {
  std::vector<OwnedTensor> out;
  for (const auto& [name, t] : expected["tensors"].items()) {
    OwnedTensor o;
    o.name = name;
    for (DType d :
         {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt64, DType::kUInt8, DType::kFloat64}) {
      if (t["dtype"] == safetensors_dtype_name(d)) o.dtype = d;
    }
    o.shape = t["shape"].get<std::vector<std::int64_t>>();
    o.bytes = from_hex(t["bytes_hex"].get<std::string>());
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<TensorRef> refs(const std::vector<OwnedTensor>& tensors) {
  std::vector<TensorRef> out;
  for (const auto& t : tensors) out.push_back(t.ref());
  return out;
}

// A safetensors file from a header text (padded by the caller if it wants) and a data region.
std::vector<std::uint8_t> make_file(const std::string& header, const std::string& data = "",
                                    std::optional<std::uint64_t> length = std::nullopt) {
  const std::uint64_t n = length.value_or(header.size());
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(n >> (8 * i));
  return to_bytes(out + header + data);
}

std::string tensor_json(const std::string& name, const std::string& dtype, const std::string& shape,
                        const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

class StorageSafetensors : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    expected_ = nlohmann::json::parse(testing::read_file(kGoldens / "tiny.json"));
  }
  nlohmann::json expected_;
};

TEST_F(StorageSafetensors, ReadsThePythonGolden) {
  auto file = read_safetensors(kGoldens / "tiny.safetensors");
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  const SafetensorsFile& f = file.value();
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(f.tensors().size(), expected_["tensors"].size());
  std::vector<std::string> names;
  for (const auto& e : f.tensors()) names.push_back(e.name);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));

  for (const auto& [name, t] : expected_["tensors"].items()) {
    SCOPED_TRACE(name);
    const SafetensorsEntry* e = f.find(name);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(safetensors_dtype_name(e->dtype), t["dtype"].get<std::string>());
    EXPECT_EQ(e->shape, t["shape"].get<std::vector<std::int64_t>>());
    const std::vector<std::uint8_t> bytes(f.data(*e), f.data(*e) + e->nbytes);
    EXPECT_EQ(bytes, from_hex(t["bytes_hex"].get<std::string>()));
    // The values themselves, decoded from our bytes, for the types C++ reads natively.
    const auto& values = t["values"];
    ASSERT_EQ(values.size() * dtype_size(e->dtype), e->nbytes);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint8_t* p = f.data(*e) + i * dtype_size(e->dtype);
      if (e->dtype == DType::kFloat32) {
        float v;
        std::memcpy(&v, p, 4);
        EXPECT_EQ(v, values[i].get<double>()) << i;
      } else if (e->dtype == DType::kInt64) {
        std::int64_t v;
        std::memcpy(&v, p, 8);
        EXPECT_EQ(v, values[i].get<std::int64_t>()) << i;
      } else if (e->dtype == DType::kUInt8) {
        EXPECT_EQ(*p, values[i].get<int>()) << i;
      } else if (e->dtype == DType::kBFloat16) {
        const std::uint32_t bits = static_cast<std::uint32_t>(p[0] | (p[1] << 8)) << 16;
        float v;
        std::memcpy(&v, &bits, 4);
        EXPECT_EQ(v, values[i].get<double>()) << i;
      }
    }
  }
  auto temperature = f.read("temperature");
  ASSERT_TRUE(temperature.is_ok());
  EXPECT_TRUE(temperature.value().shape.empty());
  EXPECT_EQ(temperature.value().bytes.size(), 4u);
  EXPECT_EQ(f.read("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.find("nope"), nullptr);
}

TEST_F(StorageSafetensors, WriterMatchesPythonByteForByte) {
  const auto tensors = golden_tensors(expected_);
  const fs::path ours = dir_ / "ours.safetensors";
  const Status s = write_safetensors(ours, refs(tensors), {{"format", "pt"}});
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(testing::read_file(ours), testing::read_file(kGoldens / "tiny.safetensors"));
}

TEST_F(StorageSafetensors, RoundTripsEveryDtype) {
  const std::vector<OwnedTensor> tensors = {
      pattern_tensor("a.f32", DType::kFloat32, {3, 5}, 1),
      pattern_tensor("b.f16", DType::kFloat16, {7}, 2),
      pattern_tensor("c.bf16", DType::kBFloat16, {2, 3, 1}, 3),
      pattern_tensor("d.i64", DType::kInt64, {5}, 4),
      pattern_tensor("e.u8", DType::kUInt8, {13}, 5),
      pattern_tensor("scalar", DType::kInt64, {}, 6),
      pattern_tensor("zero", DType::kFloat16, {4, 0}, 7),
      pattern_tensor("Zébra/ünïcode name", DType::kUInt8, {1}, 8),
  };
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"step", "100"}, {"note", "quote \" and \\ and ✓"}};
  const fs::path path = dir_ / "round.safetensors";
  const Status s = write_safetensors(path, refs(tensors), metadata);
  ASSERT_TRUE(s.is_ok()) << s.to_string();

  const std::string raw = testing::read_file(path);
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, raw.data(), 8);
  EXPECT_EQ(header_size % 8, 0u);

  auto file = read_safetensors(path);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ(file.value().metadata(), metadata);
  ASSERT_EQ(file.value().tensors().size(), tensors.size());
  for (const auto& t : tensors) {
    SCOPED_TRACE(t.name);
    auto back = file.value().read(t.name);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_EQ(back.value().dtype, t.dtype);
    EXPECT_EQ(back.value().shape, t.shape);
    EXPECT_EQ(back.value().bytes, t.bytes);
    // Largest elements first keeps every tensor aligned to its element size in the file.
    const SafetensorsEntry* e = file.value().find(t.name);
    EXPECT_EQ((8 + header_size + e->begin) % dtype_size(t.dtype), 0u);
  }
  // ref() gives views that write the same file again.
  std::vector<TensorRef> again;
  for (const auto& e : file.value().tensors()) again.push_back(file.value().ref(e));
  ASSERT_TRUE(write_safetensors(dir_ / "again.safetensors", again, metadata).is_ok());
  EXPECT_EQ(testing::read_file(dir_ / "again.safetensors"), raw);
}

TEST_F(StorageSafetensors, EmptyMetadataIsLeftOut) {
  const auto t = pattern_tensor("w", DType::kFloat32, {2}, 1);
  ASSERT_TRUE(write_safetensors(dir_ / "m.safetensors", {t.ref()}).is_ok());
  const std::string raw = testing::read_file(dir_ / "m.safetensors");
  EXPECT_FALSE(contains(raw, "__metadata__"));
  EXPECT_TRUE(contains(raw, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})"));
  auto file = read_safetensors(dir_ / "m.safetensors");
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_TRUE(file.value().metadata().empty());

  ASSERT_TRUE(write_safetensors(dir_ / "none.safetensors", {}).is_ok());
  auto none = read_safetensors(dir_ / "none.safetensors");
  ASSERT_TRUE(none.is_ok()) << none.status().to_string();
  EXPECT_TRUE(none.value().tensors().empty());
}

TEST_F(StorageSafetensors, WriterRejectsInvalidTensors) {
  const auto good = pattern_tensor("w", DType::kFloat32, {2}, 1);
  TensorRef short_bytes = good.ref();
  short_bytes.nbytes = 4;
  TensorRef negative = good.ref();
  negative.shape = {-2};
  TensorRef reserved = good.ref();
  reserved.name = "__metadata__";
  TensorRef bad_utf8 = good.ref();
  bad_utf8.name = "w\xff";
  const std::vector<std::vector<TensorRef>> cases = {
      {short_bytes}, {negative}, {reserved}, {good.ref(), good.ref()}, {bad_utf8}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Status s = write_safetensors(dir_ / "bad.safetensors", cases[i]);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << i << ": " << s.to_string();
    EXPECT_TRUE(contains(s.message(), "bad.safetensors")) << s.message();
  }
  const Status meta = write_safetensors(dir_ / "bad.safetensors", {good.ref()}, {{"k", "\xc3"}});
  EXPECT_EQ(meta.code(), StatusCode::kInvalidArgument) << meta.to_string();
  EXPECT_TRUE(fs::is_empty(dir_)) << "nothing may be left behind";
}

TEST_F(StorageSafetensors, WriteIsAtomicAndLeavesNoTemporaryFiles) {
  const auto a = pattern_tensor("w", DType::kFloat32, {4}, 1);
  const auto b = pattern_tensor("w", DType::kFloat32, {8}, 2);
  const fs::path path = dir_ / "model.safetensors";
  ASSERT_TRUE(write_safetensors(path, {a.ref()}).is_ok());
  ASSERT_TRUE(write_safetensors(path, {b.ref()}).is_ok());  // replaces
  auto file = read_safetensors(path);
  ASSERT_TRUE(file.is_ok());
  EXPECT_EQ(file.value().read("w").value().bytes, b.bytes);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);

  const Status missing_dir = write_safetensors(dir_ / "no" / "such" / "m.safetensors", {a.ref()});
  EXPECT_EQ(missing_dir.code(), StatusCode::kFailedPrecondition) << missing_dir.to_string();
  EXPECT_TRUE(contains(missing_dir.message(), "no/such")) << missing_dir.message();
}

TEST_F(StorageSafetensors, MissingFileIsNotFound) {
  auto r = read_safetensors(dir_ / "absent.safetensors");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(r.status().message(), "absent.safetensors"));
  EXPECT_EQ(read_safetensors(dir_).status().code(), StatusCode::kDataLoss);  // a directory
}

struct Malformed {
  const char* what;
  std::vector<std::uint8_t> bytes;
  std::string tensor;  ///< the tensor the message must name, if any
};

// "[1,1,...,1]" with `rank` dimensions.
std::string ones_shape(int rank) {
  std::string s = "[1";
  for (int i = 1; i < rank; ++i) s += ",1";
  return s + "]";
}

std::vector<Malformed> malformed_files() {
  const std::string w = tensor_json("w", "F32", "[2]", "[0,8]");
  const std::string eight(8, 'x');
  std::vector<Malformed> cases = {
      {"empty file", {}, ""},
      {"shorter than the length field", {1, 0, 0}, ""},
      {"header length past the end", make_file("{" + w + "}", eight, 1000), ""},
      {"header length huge", make_file("{" + w + "}", eight, 1ull << 63), ""},
      {"header length over the cap", make_file("{}", "", kMaxSafetensorsHeaderBytes + 1), ""},
      {"header length zero", make_file("", eight), ""},
      {"header not JSON", make_file("{not json at all", eight), ""},
      {"header not an object", make_file("[1,2,3]", ""), ""},
      {"header cut short", make_file("{" + w, eight), ""},
      {"trailing garbage after the header", make_file("{" + w + "}xx", eight), ""},
      {"header not UTF-8", make_file("{\"w\xff\":{}}", ""), ""},
      {"header nested too deep", make_file("{\"w\":" + std::string(100, '[') + std::string(100, ']') + "}", ""), ""},
      {"tensor not an object", make_file("{\"w\":[1]}", ""), "w"},
      {"dtype missing", make_file(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", eight), "w"},
      {"dtype not a string", make_file(R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", eight), "w"},
      {"unknown dtype", make_file("{" + tensor_json("w", "F33", "[2]", "[0,8]") + "}", eight), "w"},
      {"shape not an array", make_file("{" + tensor_json("w", "F32", "2", "[0,8]") + "}", eight), "w"},
      {"negative shape", make_file("{" + tensor_json("w", "F32", "[-2]", "[0,8]") + "}", eight), "w"},
      {"fractional shape", make_file("{" + tensor_json("w", "F32", "[2.0]", "[0,8]") + "}", eight), "w"},
      {"shape beyond int64", make_file("{" + tensor_json("w", "U8", "[18446744073709551615]", "[0,8]") + "}", eight),
       "w"},
      {"shape product overflows",
       make_file("{" + tensor_json("w", "F32", "[4294967296,4294967296]", "[0,8]") + "}", eight), "w"},
      {"too many dimensions", make_file("{" + tensor_json("w", "U8", ones_shape(65), "[0,1]") + "}", "x"), "w"},
      {"offsets missing", make_file(R"({"w":{"dtype":"F32","shape":[2]}})", eight), "w"},
      {"offsets not a pair", make_file("{" + tensor_json("w", "F32", "[2]", "[0,8,16]") + "}", eight), "w"},
      {"negative offset", make_file("{" + tensor_json("w", "F32", "[2]", "[-8,0]") + "}", eight), "w"},
      {"end before begin", make_file("{" + tensor_json("w", "F32", "[0]", "[8,0]") + "}", eight), "w"},
      {"offsets out of range", make_file("{" + tensor_json("w", "F32", "[2]", "[8,16]") + "}", eight), "w"},
      {"wrong byte count", make_file("{" + tensor_json("w", "F32", "[3]", "[0,8]") + "}", eight), "w"},
      {"overlapping tensors",
       make_file("{" + tensor_json("a", "F32", "[2]", "[0,8]") + "," + tensor_json("b", "F32", "[2]", "[4,12]") + "}",
                 eight + "yyyy"),
       "b"},
      {"gap between tensors",
       make_file("{" + tensor_json("a", "F32", "[1]", "[0,4]") + "," + tensor_json("b", "F32", "[1]", "[8,12]") + "}",
                 eight + "yyyy"),
       "b"},
      {"data left over", make_file("{" + w + "}", eight + "z"), ""},
      {"data missing (truncated file)", make_file("{" + w + "}", "xxxx"), "w"},
      {"duplicate name hides a tensor", make_file("{" + w + "," + tensor_json("w", "F32", "[1]", "[0,4]") + "}", eight),
       ""},
      {"metadata not an object", make_file(R"({"__metadata__":"pt"})", ""), ""},
      {"metadata value not a string", make_file(R"({"__metadata__":{"step":5}})", ""), ""},
  };
  return cases;
}

TEST_F(StorageSafetensors, MalformedFilesAreDataLoss) {
  for (const Malformed& m : malformed_files()) {
    SCOPED_TRACE(m.what);
    const fs::path path = dir_ / "bad.safetensors";
    testing::write_file(path, std::string(m.bytes.begin(), m.bytes.end()));
    auto r = read_safetensors(path);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().to_string();
    EXPECT_TRUE(contains(r.status().message(), path.string())) << r.status().message();
    if (!m.tensor.empty()) {
      EXPECT_TRUE(contains(r.status().message(), "tensor '" + m.tensor + "'")) << r.status().message();
    }
  }
}

TEST_F(StorageSafetensors, SupportedByTheFormatButNotByTenaxIsFailedPrecondition) {
  auto r = parse_safetensors(make_file("{" + tensor_json("w", "I32", "[2]", "[0,8]") + "}", std::string(8, 'x')), "f");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().to_string();
  EXPECT_TRUE(contains(r.status().message(), "I32")) << r.status().message();
}

TEST_F(StorageSafetensors, EveryTruncationOfTheGoldenIsDataLoss) {
  const std::string golden = testing::read_file(kGoldens / "tiny.safetensors");
  for (std::size_t n = 0; n < golden.size(); ++n) {
    auto r = parse_safetensors(to_bytes(golden.substr(0, n)), "cut");
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << "cut at " << n;
  }
}

TEST_F(StorageSafetensors, FlippedHeaderBytesNeverCrash) {
  // Every bit of the length field and header flipped in turn: the reader must answer with a
  // Status (usually kDataLoss; sometimes the header still parses, e.g. a changed name).
  const std::string golden = testing::read_file(kGoldens / "tiny.safetensors");
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, golden.data(), 8);
  int rejected = 0;
  for (std::size_t at = 0; at < 8 + header_size; ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bytes = golden;
      bytes[at] = static_cast<char>(bytes[at] ^ (1 << bit));
      auto r = parse_safetensors(to_bytes(bytes), "flip");
      if (r.is_ok()) continue;
      ++rejected;
      EXPECT_TRUE(r.status().code() == StatusCode::kDataLoss || r.status().code() == StatusCode::kFailedPrecondition)
          << r.status().to_string();
    }
  }
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace tenax::storage
