#include "json_fields.h"

#include <limits>

#include "shape_bytes.h"
#include "tenax/core/checksum.h"

namespace tenax::storage::detail {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& problem) { throw FieldError(path + ": " + problem); }

std::string child(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

}  // namespace

const nlohmann::json& field(const nlohmann::json& obj, const std::string& key, const std::string& path) {
  if (!obj.is_object()) fail(path.empty() ? "(root)" : path, "expected a JSON object");
  auto it = obj.find(key);
  if (it == obj.end()) fail(child(path, key), "missing");
  return *it;
}

std::string get_string(const nlohmann::json& obj, const std::string& key, const std::string& path) {
  const nlohmann::json& v = field(obj, key, path);
  if (!v.is_string()) fail(child(path, key), "expected a string");
  return v.get<std::string>();
}

std::int64_t get_int64(const nlohmann::json& obj, const std::string& key, const std::string& path) {
  const nlohmann::json& v = field(obj, key, path);
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(child(path, key), "integer out of range");
    }
    return static_cast<std::int64_t>(u);
  }
  if (!v.is_number_integer()) fail(child(path, key), "expected an integer");
  return v.get<std::int64_t>();
}

std::uint64_t get_uint64(const nlohmann::json& obj, const std::string& key, const std::string& path) {
  const nlohmann::json& v = field(obj, key, path);
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer()) fail(child(path, key), "must not be negative");
  fail(child(path, key), "expected a non-negative integer");
}

std::uint64_t get_checksum(const nlohmann::json& obj, const std::string& key, const std::string& path) {
  const std::string text = get_string(obj, key, path);
  if (text.size() != 16) fail(child(path, key), "expected 16 hex digits");
  std::uint64_t value = 0;
  for (char c : text) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) fail(child(path, key), "expected 16 lowercase hex digits");
    value = (value << 4) | static_cast<std::uint64_t>(digit);
  }
  return value;
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

bool is_valid_tensor_name(const std::string& name) {
  if (name.empty() || name.front() == '/' || name.back() == '/') return false;
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return name.find('\0') == std::string::npos;
}

nlohmann::json entry_to_json(const IndexEntry& entry) {
  nlohmann::json json{{"shard", entry.shard},
                      {"dtype", dtype_name(entry.dtype)},
                      {"shape", entry.shape},
                      {"nbytes", entry.nbytes},
                      {"checksum", checksum_hex(entry.checksum)}};
  if (entry.offset) json["offset"] = *entry.offset;
  return json;
}

IndexEntry entry_from_json(const nlohmann::json& obj, std::string name, const std::string& path) {
  IndexEntry entry;
  entry.name = std::move(name);
  if (!is_valid_tensor_name(entry.name)) {
    fail(path,
         "invalid tensor name (empty, leading/trailing '/', an empty, '.' or '..' "
         "component, or a NUL)");
  }
  entry.shard = get_string(obj, "shard", path);
  if (!is_plain_file_name(entry.shard)) fail(child(path, "shard"), "not a plain file name");
  const std::string dtype = get_string(obj, "dtype", path);
  const auto parsed = dtype_from_name(dtype);
  if (!parsed) fail(child(path, "dtype"), "unknown dtype \"" + dtype + "\"");
  entry.dtype = *parsed;
  const nlohmann::json& shape = field(obj, "shape", path);
  if (!shape.is_array()) fail(child(path, "shape"), "expected an array of integers");
  if (shape.size() > 64) fail(child(path, "shape"), "more than 64 dimensions");
  for (const nlohmann::json& dim : shape) {
    if (dim.is_number_unsigned()) {
      const auto u = dim.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        fail(child(path, "shape"), "dimension out of range");
      }
      entry.shape.push_back(static_cast<std::int64_t>(u));
    } else if (dim.is_number_integer()) {
      fail(child(path, "shape"), "negative dimension");
    } else {
      fail(child(path, "shape"), "expected an array of integers");
    }
  }
  entry.nbytes = get_uint64(obj, "nbytes", path);
  entry.checksum = get_checksum(obj, "checksum", path);
  if (obj.contains("offset")) entry.offset = get_uint64(obj, "offset", path);
  const auto expected = shape_nbytes(entry.dtype, entry.shape);
  if (!expected) fail(child(path, "shape"), "element count overflows");
  if (*expected != entry.nbytes) {
    fail(child(path, "nbytes"),
         std::to_string(entry.nbytes) + " does not match shape and dtype (" + std::to_string(*expected) + " bytes)");
  }
  return entry;
}

}  // namespace tenax::storage::detail
