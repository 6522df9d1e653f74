#include "tenax/storage/manifest.h"

#include <limits>
#include <set>

#include "json_fields.h"
#include "tenax/core/checksum.h"
#include "tenax/core/error.h"

namespace tenax::storage {
namespace {

// Identifies the file type for humans and tools; checked on read.
constexpr const char* kFormatName = "tenax-checkpoint";
constexpr int kMaxDepth = 256;

using detail::FieldError;

std::uint64_t xxh3_64_of(const std::string& text) { return xxh3_64(text.data(), text.size()); }

int get_int(const nlohmann::json& obj, const std::string& key) {
  const std::int64_t v = detail::get_int64(obj, key, "");
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    throw FieldError(key + ": integer out of range");
  }
  return static_cast<int>(v);
}

std::int64_t get_non_negative(const nlohmann::json& obj, const std::string& key) {
  const std::int64_t v = detail::get_int64(obj, key, "");
  if (v < 0) throw FieldError(key + ": must not be negative");
  return v;
}

// The manifest checksums itself: XXH3-64 of its content without this key, printed as compact
// JSON (keys sorted, as nlohmann::json keeps them), so every field a load trusts — offsets,
// dtypes, shapes, tensor checksums — is covered, and the pretty-printing does not matter.
constexpr const char* kContentChecksumKey = "content_checksum";

std::uint64_t content_checksum(const nlohmann::json& root_without_checksum) {
  return xxh3_64_of(root_without_checksum.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Manifest parse_or_throw(const nlohmann::json& root) {
  if (!root.is_object()) throw FieldError("(root): expected a JSON object");
  Manifest m;
  // The version is checked before anything else so that a newer format gets the clear message
  // rather than a complaint about whichever key it renamed.
  m.format_version = get_int(root, "format_version");
  if (m.format_version > kManifestFormatVersion) {
    throw FieldError("format_version: " + std::to_string(m.format_version) +
                     " was written by a newer Tenax; this build reads version " +
                     std::to_string(kManifestFormatVersion) + ". Upgrade Tenax to load it");
  }
  if (m.format_version != kManifestFormatVersion) {
    throw FieldError("format_version: unknown version " + std::to_string(m.format_version));
  }
  const std::string format = detail::get_string(root, "format", "");
  if (format != kFormatName) {
    throw FieldError("format: \"" + format + "\" is not \"" + kFormatName + "\"");
  }
  m.step = get_non_negative(root, "step");
  m.epoch = get_non_negative(root, "epoch");
  m.generation = get_non_negative(root, "generation");
  m.world_size = get_int(root, "world_size");
  if (m.world_size < 1) throw FieldError("world_size: must be >= 1");

  const nlohmann::json& shards = detail::field(root, "shards", "");
  if (!shards.is_array()) throw FieldError("shards: expected an array");
  if (shards.size() != static_cast<std::size_t>(m.world_size)) {
    throw FieldError("shards: " + std::to_string(shards.size()) + " listed but world_size is " +
                     std::to_string(m.world_size));
  }
  std::set<std::string> shard_files;
  std::map<std::string, std::uint64_t> shard_bytes;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string path = "shards[" + std::to_string(i) + "]";
    ShardSummary s;
    s.file = detail::get_string(shards[i], "file", path);
    if (!detail::is_plain_file_name(s.file)) throw FieldError(path + ".file: not a plain file name");
    if (!shard_files.insert(s.file).second) throw FieldError(path + ".file: listed twice");
    s.bytes = detail::get_uint64(shards[i], "bytes", path);
    s.checksum = detail::get_checksum(shards[i], "checksum", path);
    shard_bytes[s.file] = s.bytes;
    m.shards.push_back(std::move(s));
  }

  const nlohmann::json& tensors = detail::field(root, "tensors", "");
  if (!tensors.is_object()) throw FieldError("tensors: expected an object");
  for (auto it = tensors.begin(); it != tensors.end(); ++it) {
    // The key as a JSON string: escapes a NUL, which would cut the message short.
    const std::string path =
        "tensors[" + nlohmann::json(it.key()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "]";
    if (it.key().empty()) throw FieldError("tensors: empty tensor name");
    IndexEntry entry = detail::entry_from_json(it.value(), it.key(), path);
    if (shard_files.count(entry.shard) == 0) {
      throw FieldError(path + ".shard: \"" + entry.shard + "\" is not in the shard list");
    }
    if (entry.offset) {
      // The data must lie inside the file the manifest lists (no overflow in the sum).
      const std::uint64_t file_bytes = shard_bytes.at(entry.shard);
      if (*entry.offset > file_bytes || entry.nbytes > file_bytes - *entry.offset) {
        throw FieldError(path + ".offset: bytes " + std::to_string(*entry.offset) + " + " +
                         std::to_string(entry.nbytes) + " lie beyond the end of \"" + entry.shard + "\" (" +
                         std::to_string(file_bytes) + " bytes)");
      }
    }
    m.tensors.emplace(it.key(), std::move(entry));
  }

  m.trainer_state = detail::field(root, "trainer_state", "");
  if (!m.trainer_state.is_object()) throw FieldError("trainer_state: expected an object");
  m.arguments = detail::field(root, "arguments", "");
  if (!m.arguments.is_object()) throw FieldError("arguments: expected an object");

  // Checked last, so that a damaged manifest still gets the most specific message above.
  bool has_offsets = false;
  for (const auto& [name, entry] : m.tensors) has_offsets = has_offsets || entry.offset.has_value();
  if (root.contains(kContentChecksumKey)) {
    const std::uint64_t stated = detail::get_checksum(root, kContentChecksumKey, "");
    nlohmann::json rest = root;
    rest.erase(kContentChecksumKey);
    const std::uint64_t actual = content_checksum(rest);
    if (actual != stated) {
      throw FieldError(std::string(kContentChecksumKey) + ": " + checksum_hex(stated) +
                       " does not match the manifest's content (" + checksum_hex(actual) +
                       "): it was edited or damaged after the commit");
    }
  } else if (has_offsets) {
    // Offsets let a load skip HDF5's own bookkeeping; only a checksummed manifest may do that.
    throw FieldError(std::string(kContentChecksumKey) + ": missing, but the manifest records tensor offsets");
  }
  return m;
}

}  // namespace

Manifest make_manifest(std::int64_t step, std::int64_t epoch, std::int64_t generation,
                       const std::vector<ShardInfo>& shards_in_rank_order) {
  if (shards_in_rank_order.empty()) throw StorageError("make_manifest: no shards");
  Manifest m;
  m.step = step;
  m.epoch = epoch;
  m.generation = generation;
  m.world_size = static_cast<int>(shards_in_rank_order.size());
  std::set<std::string> files;
  for (const ShardInfo& shard : shards_in_rank_order) {
    if (!files.insert(shard.file).second) {
      throw StorageError("make_manifest: shard file " + shard.file + " listed twice");
    }
    m.shards.push_back(ShardSummary{shard.file, shard.bytes, shard.checksum});
    for (const IndexEntry& entry : shard.tensors) {
      IndexEntry copy = entry;
      copy.shard = shard.file;
      auto [it, inserted] = m.tensors.emplace(entry.name, std::move(copy));
      if (!inserted) {
        throw StorageError("make_manifest: tensor '" + entry.name + "' was written to both " + it->second.shard +
                           " and " + shard.file + "; every rank must follow the same write plan");
      }
    }
  }
  return m;
}

std::string manifest_to_string(const Manifest& manifest) {
  nlohmann::json shards = nlohmann::json::array();
  for (const ShardSummary& s : manifest.shards) {
    shards.push_back({{"file", s.file}, {"bytes", s.bytes}, {"checksum", checksum_hex(s.checksum)}});
  }
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& [name, entry] : manifest.tensors) tensors[name] = detail::entry_to_json(entry);
  nlohmann::json root{{"format", kFormatName},
                      {"format_version", manifest.format_version},
                      {"step", manifest.step},
                      {"epoch", manifest.epoch},
                      {"world_size", manifest.world_size},
                      {"generation", manifest.generation},
                      {"shards", std::move(shards)},
                      {"tensors", std::move(tensors)},
                      {"trainer_state", manifest.trainer_state},
                      {"arguments", manifest.arguments}};
  root[kContentChecksumKey] = checksum_hex(content_checksum(root));
  // Invalid UTF-8 in user-provided names or state must not make the save throw.
  return root.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void seal_manifest(nlohmann::json& root) {
  if (!root.is_object()) return;
  root.erase(kContentChecksumKey);
  root[kContentChecksumKey] = checksum_hex(content_checksum(root));
}

StatusOr<Manifest> parse_manifest(const std::string& text, const std::string& where) {
  try {
    // Copying and printing JSON recurses, so absurd nesting is refused up front.
    bool too_deep = false;
    const nlohmann::json::parser_callback_t limit_depth = [&too_deep](int depth, nlohmann::json::parse_event_t,
                                                                      nlohmann::json&) {
      if (depth > kMaxDepth) too_deep = true;
      return !too_deep;
    };
    const nlohmann::json root = nlohmann::json::parse(text, limit_depth, /*allow_exceptions=*/false);
    if (too_deep) {
      return Status(StatusCode::kDataLoss,
                    where + ": JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    if (root.is_discarded()) {
      return Status(StatusCode::kDataLoss, where + ": not valid JSON (corrupt or truncated manifest)");
    }
    return parse_or_throw(root);
  } catch (const FieldError& e) {
    return Status(StatusCode::kDataLoss, where + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    return Status(StatusCode::kDataLoss, where + ": " + e.what());
  }
}

}  // namespace tenax::storage
