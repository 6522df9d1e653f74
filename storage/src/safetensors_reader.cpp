// The safetensors reader: every byte is untrusted (see safetensors.h for the checks).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>
#include <utility>

#include "shape_bytes.h"
#include "tenax/storage/safetensors.h"

namespace tenax::storage {
namespace fs = std::filesystem;

namespace {

constexpr const char* kMetadataKey = "__metadata__";
// A valid header is three levels deep; anything much deeper is an attack on the parser.
constexpr int kMaxJsonDepth = 8;
constexpr std::size_t kMaxRank = 64;

// Thrown while parsing one header; turned into a Status by parse_safetensors.
struct Fault {
  StatusCode code;
  std::string tensor;  ///< empty when the fault is not about one tensor
  std::string what;
};

[[noreturn]] void fail(const std::string& tensor, std::string what, StatusCode code = StatusCode::kDataLoss) {
  throw Fault{code, tensor, std::move(what)};
}

// Valid safetensors dtypes that Tenax has no DType for: the file is fine, the tensor is not ours.
bool is_other_safetensors_dtype(const std::string& name) {
  static const std::set<std::string> kOthers = {"BOOL",    "I8",      "I16", "U16",     "I32",
                                                "U32",     "U64",     "F64", "C64",     "F8_E5M2",
                                                "F8_E4M3", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2"};
  return kOthers.count(name) != 0;
}

DType parse_dtype(const std::string& tensor, const nlohmann::json& value) {
  if (!value.is_string()) fail(tensor, "dtype: expected a string");
  const std::string name = value.get<std::string>();
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt64, DType::kUInt8, DType::kFloat64}) {
    if (name == safetensors_dtype_name(d)) return d;
  }
  if (is_other_safetensors_dtype(name)) {
    fail(tensor, "dtype " + name + " is not supported (Tenax reads F32, F64, F16, BF16, I64, U8)",
         StatusCode::kFailedPrecondition);
  }
  fail(tensor, "unknown dtype \"" + name + "\"");
}

std::uint64_t parse_count(const std::string& tensor, const char* what, const nlohmann::json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer()) fail(tensor, std::string(what) + ": negative value");
  fail(tensor, std::string(what) + ": expected non-negative integers");
}

const nlohmann::json& member(const std::string& tensor, const nlohmann::json& info, const char* key) {
  const auto it = info.find(key);
  if (it == info.end()) fail(tensor, std::string(key) + ": missing");
  return *it;
}

SafetensorsEntry parse_entry(const std::string& name, const nlohmann::json& info) {
  if (!info.is_object()) fail(name, "expected a JSON object");
  SafetensorsEntry e;
  e.name = name;
  e.dtype = parse_dtype(name, member(name, info, "dtype"));

  const nlohmann::json& shape = member(name, info, "shape");
  if (!shape.is_array()) fail(name, "shape: expected an array");
  if (shape.size() > kMaxRank) fail(name, "shape: more than 64 dimensions");
  for (const nlohmann::json& dim : shape) {
    const std::uint64_t d = parse_count(name, "shape", dim);
    if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(name, "shape: dimension " + std::to_string(d) + " out of range");
    }
    e.shape.push_back(static_cast<std::int64_t>(d));
  }
  const auto nbytes = detail::shape_nbytes(e.dtype, e.shape);
  if (!nbytes) fail(name, "shape: element count overflows");
  e.nbytes = *nbytes;

  const nlohmann::json& offsets = member(name, info, "data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    fail(name, "data_offsets: expected [begin, end]");
  }
  e.begin = parse_count(name, "data_offsets", offsets[0]);
  const std::uint64_t end = parse_count(name, "data_offsets", offsets[1]);
  if (end < e.begin) {
    fail(name, "data_offsets: end " + std::to_string(end) + " before begin " + std::to_string(e.begin));
  }
  if (end - e.begin != e.nbytes) {
    fail(name, "data_offsets: [" + std::to_string(e.begin) + ", " + std::to_string(end) + ") holds " +
                   std::to_string(end - e.begin) + " bytes but " + safetensors_dtype_name(e.dtype) + " x shape needs " +
                   std::to_string(e.nbytes));
  }
  return e;
}

std::map<std::string, std::string> parse_metadata(const nlohmann::json& value) {
  if (!value.is_object()) fail("", "__metadata__: expected an object of strings");
  std::map<std::string, std::string> metadata;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!it.value().is_string()) fail("", "__metadata__." + it.key() + ": expected a string");
    metadata.emplace(it.key(), it.value().get<std::string>());
  }
  return metadata;
}

// Checks that the tensors tile [0, data_size) exactly: sorted by offset, each begins where the
// previous one ended and the last ends at the end of the file. Each entry's end is
// begin + nbytes (parse_entry checked that).
void check_coverage(const std::vector<SafetensorsEntry>& entries, std::uint64_t data_size) {
  std::vector<const SafetensorsEntry*> spans;
  for (const SafetensorsEntry& e : entries) spans.push_back(&e);
  std::sort(spans.begin(), spans.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->nbytes < b->nbytes;
  });
  std::uint64_t expected = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry* e : spans) {
    const std::uint64_t end = e->begin + e->nbytes;  // no overflow: end was parsed as a u64
    if (end > data_size) {
      fail(e->name, "data_offsets: end " + std::to_string(end) + " is past the data region (" +
                        std::to_string(data_size) + " bytes)");
    }
    if (e->begin < expected) fail(e->name, "data_offsets: overlaps tensor '" + previous->name + "'");
    if (e->begin > expected) {
      fail(e->name, "data_offsets: begins at " + std::to_string(e->begin) + ", leaving bytes [" +
                        std::to_string(expected) + ", " + std::to_string(e->begin) + ") that belong to no tensor");
    }
    expected = end;
    previous = e;
  }
  if (expected != data_size) {
    fail("", "tensors cover " + std::to_string(expected) + " bytes of a data region of " + std::to_string(data_size) +
                 " (trailing bytes, or a truncated header)");
  }
}

}  // namespace

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                                   [](const SafetensorsEntry& e, const std::string& n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

const std::uint8_t* SafetensorsFile::data(const SafetensorsEntry& entry) const {
  return bytes_.data() + data_start_ + entry.begin;
}

TensorRef SafetensorsFile::ref(const SafetensorsEntry& entry) const {
  return TensorRef{entry.name, entry.dtype, entry.shape, data(entry), static_cast<std::size_t>(entry.nbytes)};
}

StatusOr<TensorData> SafetensorsFile::read(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) {
    return Status(StatusCode::kNotFound, source_ + ": no tensor '" + name + "'");
  }
  TensorData t;
  t.dtype = e->dtype;
  t.shape = e->shape;
  t.bytes.assign(data(*e), data(*e) + e->nbytes);
  return t;
}

StatusOr<SafetensorsFile> parse_safetensors(std::vector<std::uint8_t> bytes, std::string where) {
  const std::uint64_t size = bytes.size();
  if (size < 8) {
    return Status(StatusCode::kDataLoss,
                  where + ": " + std::to_string(size) + " bytes, too short for a safetensors file");
  }
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) {
    header_size = (header_size << 8) | bytes[static_cast<std::size_t>(i)];
  }
  if (header_size > kMaxSafetensorsHeaderBytes) {
    return Status(StatusCode::kDataLoss, where + ": header length " + std::to_string(header_size) + " exceeds the " +
                                             std::to_string(kMaxSafetensorsHeaderBytes) +
                                             "-byte limit (not a safetensors file?)");
  }
  if (header_size > size - 8) {
    return Status(StatusCode::kDataLoss, where + ": header length " + std::to_string(header_size) +
                                             " but the file has only " + std::to_string(size) + " bytes (truncated?)");
  }
  const auto header_begin = bytes.begin() + 8;
  const auto header_end = header_begin + static_cast<std::ptrdiff_t>(header_size);
  if (header_size == 0 || *header_begin != '{') {
    return Status(StatusCode::kDataLoss, where + ": header does not start with '{'");
  }

  bool too_deep = false;
  const nlohmann::json::parser_callback_t limit_depth = [&too_deep](int depth, nlohmann::json::parse_event_t,
                                                                    nlohmann::json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_end, limit_depth,
                                   /*allow_exceptions=*/false);
  } catch (const nlohmann::json::exception& e) {  // defensive: parse itself should not throw
    return Status(StatusCode::kDataLoss, where + ": header is not valid JSON (" + e.what() + ")");
  }
  if (too_deep) {
    return Status(StatusCode::kDataLoss,
                  where + ": header JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  if (header.is_discarded() || !header.is_object()) {
    return Status(StatusCode::kDataLoss, where + ": header is not a valid JSON object (corrupt or truncated)");
  }

  SafetensorsFile file;
  try {
    file.entries_.reserve(header.size());
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == kMetadataKey) {
        file.metadata_ = parse_metadata(it.value());
      } else {
        file.entries_.push_back(parse_entry(it.key(), it.value()));
      }
    }
    // nlohmann's object is a std::map, so entries_ is already sorted by name.
    check_coverage(file.entries_, size - 8 - header_size);
  } catch (const Fault& f) {
    std::string message = where + ": ";
    if (!f.tensor.empty()) message += "tensor '" + f.tensor + "': ";
    return Status(f.code, message + f.what);
  } catch (const nlohmann::json::exception& e) {
    return Status(StatusCode::kDataLoss, where + ": " + e.what());
  }
  file.source_ = std::move(where);
  file.data_start_ = 8 + header_size;
  file.bytes_ = std::move(bytes);
  return file;
}

StatusOr<SafetensorsFile> read_safetensors(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) {
    return Status(StatusCode::kNotFound, path.string() + ": no such file");
  }
  if (!fs::is_regular_file(status)) {
    return Status(StatusCode::kDataLoss, path.string() + ": not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status(StatusCode::kDataLoss, path.string() + ": cannot open: " + std::strerror(errno));
  }
  std::vector<std::uint8_t> bytes;
  const auto expected_size = fs::file_size(path, ec);  // a hint only: the file may change
  if (!ec) bytes.reserve(static_cast<std::size_t>(expected_size));
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    bytes.insert(bytes.end(), buffer, buffer + in.gcount());
  }
  if (in.bad()) return Status(StatusCode::kDataLoss, path.string() + ": read error");
  return parse_safetensors(std::move(bytes), path.string());
}

}  // namespace tenax::storage
