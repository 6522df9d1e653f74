// Private: strict readers for untrusted JSON (manifests, ShardInfo from other ranks).
// Each throws FieldError("<key path>: <problem>"); the public parsers turn that into a
// kDataLoss Status. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tenax/storage/shard_writer.h"

namespace tenax::storage::detail {

/// A missing or ill-typed field; what() is "<key path>: <problem>".
class FieldError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// obj[key], which must exist; obj must be an object. `path` names obj in messages.
const nlohmann::json& field(const nlohmann::json& obj, const std::string& key, const std::string& path);
/// A string field.
std::string get_string(const nlohmann::json& obj, const std::string& key, const std::string& path);
/// An integer field (no floats, no strings), in int64 range.
std::int64_t get_int64(const nlohmann::json& obj, const std::string& key, const std::string& path);
/// A non-negative integer field.
std::uint64_t get_uint64(const nlohmann::json& obj, const std::string& key, const std::string& path);
/// A checksum field: exactly 16 lowercase hex digits.
std::uint64_t get_checksum(const nlohmann::json& obj, const std::string& key, const std::string& path);

/// A file name that stays inside its directory: non-empty, no '/', not "." or "..".
bool is_plain_file_name(const std::string& name);

/// A tensor name as write_shard accepts it: an HDF5 path relative to the root group, with no
/// leading or trailing '/', no empty, "." or ".." component and no NUL. HDF5 resolves other
/// spellings ("/a", "./a", "a//b", "a\0x") to an existing dataset, so they must not be read.
bool is_valid_tensor_name(const std::string& name);

/// The index fields of an entry (shard, dtype, shape, nbytes, checksum); not its name.
nlohmann::json entry_to_json(const IndexEntry& entry);
/// Strict inverse of entry_to_json, including nbytes == product(shape) * dtype size and a
/// valid tensor `name`.
IndexEntry entry_from_json(const nlohmann::json& obj, std::string name, const std::string& path);

}  // namespace tenax::storage::detail
