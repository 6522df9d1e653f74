#include "tenax/storage/checkpoint_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <system_error>
#include <utility>
#include <vector>

#include "file_digest.h"
#include "hdf5_handle.h"
#include "tenax/core/checksum.h"
#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/core/unique_fd.h"
#include "tenax/storage/layout.h"

namespace tenax::storage {
namespace fs = std::filesystem;
using detail::H5Handle;

namespace {

Status data_loss(const fs::path& file, const std::string& tensor, const std::string& what) {
  std::string message = file.string() + ": ";
  if (!tensor.empty()) message += "tensor '" + tensor + "': ";
  return Status(StatusCode::kDataLoss, message + what);
}

Status hdf5_loss(const fs::path& file, const std::string& tensor, const std::string& call) {
  const std::string cause = detail::error_text();
  return data_loss(file, tensor, call + " failed" + (cause.empty() ? "" : " (" + cause + ")"));
}

// Reads bytes [begin, end) of `fd` in chunks of at most `chunk`: each into `out` + (its offset
// from begin) or, when `out` is null, into `scratch` (allocated on first use); `seen` gets
// every chunk while it is still in the CPU cache. A short file is data loss naming `end`.
Status read_range(int fd, std::uint64_t begin, std::uint64_t end, char* out, std::unique_ptr<char[]>& scratch,
                  std::uint64_t chunk, const std::function<void(const char*, std::size_t)>& seen, const fs::path& path,
                  const std::string& tensor) {
  for (std::uint64_t pos = begin; pos < end;) {
    char* where = out != nullptr ? out + (pos - begin) : nullptr;
    if (where == nullptr) {
      if (!scratch) scratch.reset(new char[chunk]);
      where = scratch.get();
    }
    const auto want = static_cast<std::size_t>(std::min(chunk, end - pos));
    const ssize_t n = ::pread(fd, where, want, static_cast<off_t>(pos));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return data_loss(path, tensor, std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) {
      return data_loss(path, tensor,
                       "the file ends at byte " + std::to_string(pos) + ", the manifest needs " + std::to_string(end) +
                           " (truncated)");
    }
    seen(where, static_cast<std::size_t>(n));
    pos += static_cast<std::uint64_t>(n);
  }
  return Status::ok();
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

struct CheckpointReader::State {
  // A shard is read from disk once, whole, into memory and checked against the manifest's
  // size and XXH3 there; HDF5 then parses that verified image (never the file, which could
  // change underneath) and copies each tensor straight into the caller's memory.
  struct Shard {
    bool verified = false;                  ///< whole-file size and checksum matched the manifest
    std::unique_ptr<std::uint8_t[]> image;  ///< the file's bytes
    std::size_t size = 0;
    detail::FileImage view;  ///< what HDF5's image callbacks are handed
    H5Handle file;           ///< HDF5 over `image` (declared after it: closed first)
  };
  std::mutex mutex;
  std::map<std::string, Shard> shards;  ///< by file name
  std::map<std::string, UniqueFd> fds;  ///< shards opened for direct reads, by file name

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // A descriptor for reading tensor bytes at the manifest's offsets, opened once per shard.
  StatusOr<int> direct_fd(const fs::path& path, const std::string& file) {
    if (auto it = fds.find(file); it != fds.end()) return it->second.get();
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return data_loss(path, "", std::string("cannot open: ") + std::strerror(errno));
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    return fds.emplace(file, std::move(fd)).first->second.get();
  }

  // Checks the whole file once, so HDF5 never parses bytes that differ from what was written.
  Status verify_shard(const fs::path& path, const ShardSummary& summary, Shard& shard) {
    if (shard.verified) return Status::ok();
    detail::FileDigest digest;
    try {
      if (summary.bytes > std::numeric_limits<std::size_t>::max()) throw StorageError("too large to read");
      // new[] without (): not zeroed, read() fills it. (Transparent huge pages were tried
      // here and made loads slower under memory pressure: direct compaction on fault.)
      shard.image.reset(new std::uint8_t[std::max<std::uint64_t>(summary.bytes, 1)]);
      shard.size = static_cast<std::size_t>(summary.bytes);
      digest = detail::read_file_into(path, shard.image.get(), shard.size);
    } catch (const StorageError& e) {
      shard.image.reset();
      return data_loss(path, "", e.what());
    } catch (const std::bad_alloc&) {
      return data_loss(path, "", "cannot allocate " + std::to_string(summary.bytes) + " bytes to read it");
    }
    if (digest.bytes != summary.bytes) {
      shard.image.reset();
      return data_loss(path, "",
                       "has " + std::to_string(digest.bytes) + " or more bytes, manifest says " +
                           std::to_string(summary.bytes) + " (truncated or replaced)");
    }
    if (digest.checksum != summary.checksum) {
      shard.image.reset();
      return data_loss(path, "",
                       "file checksum " + checksum_hex(digest.checksum) + " does not match manifest " +
                           checksum_hex(summary.checksum));
    }
    shard.verified = true;
    return Status::ok();
  }
};

CheckpointReader::CheckpointReader(fs::path step_dir, Manifest manifest)
    : step_dir_(std::move(step_dir)), manifest_(std::move(manifest)), state_(std::make_unique<State>()) {
  for (const ShardSummary& s : manifest_.shards) state_->shards[s.file];
}

CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;
CheckpointReader::~CheckpointReader() {
  // The cached shards are closed by State's destructor, possibly on a thread that never
  // called read(): keep HDF5 from printing to stderr there as well.
  detail::silence_errors();
}

StatusOr<CheckpointReader> CheckpointReader::open(const fs::path& step_dir) {
  const fs::path manifest_path = step_dir / kManifestFile;
  std::error_code ec;
  if (!fs::is_regular_file(manifest_path, ec)) {
    return Status(StatusCode::kNotFound, manifest_path.string() + ": no manifest (not a committed checkpoint)");
  }
  std::string text;
  try {
    text = files::read_all(manifest_path);
  } catch (const StorageError& e) {
    return Status(StatusCode::kDataLoss, e.what());
  }
  StatusOr<Manifest> parsed = parse_manifest(text, manifest_path.string());
  if (!parsed.is_ok()) return parsed.status();
  for (const ShardSummary& shard : parsed.value().shards) {
    const fs::path file = step_dir / shard.file;
    const auto size = fs::file_size(file, ec);
    if (ec) return data_loss(file, "", "shard missing or unreadable: " + ec.message());
    if (size != shard.bytes) {
      return data_loss(file, "",
                       "has " + std::to_string(size) + " bytes, manifest says " + std::to_string(shard.bytes) +
                           " (truncated or replaced)");
    }
  }
  return CheckpointReader(step_dir, std::move(parsed).value());
}

bool CheckpointReader::contains(const std::string& name) const { return manifest_.tensors.count(name) != 0; }

Status CheckpointReader::read_into(const std::string& name, void* destination, std::size_t nbytes) const {
  const auto found = manifest_.tensors.find(name);
  if (found == manifest_.tensors.end()) {
    return Status(StatusCode::kNotFound, step_dir_.string() + ": checkpoint has no tensor '" + name + "'");
  }
  const IndexEntry& entry = found->second;
  if (nbytes != entry.nbytes) {
    return Status(StatusCode::kInvalidArgument, (step_dir_ / entry.shard).string() + ": tensor '" + name + "' has " +
                                                    std::to_string(entry.nbytes) + " bytes, the destination " +
                                                    std::to_string(nbytes));
  }
  return entry.offset ? read_direct(entry, destination) : read_via_hdf5(entry, destination);
}

Status CheckpointReader::read_direct(const IndexEntry& entry, void* destination) const {
  // The manifest says where the bytes are (parse_manifest checked that they lie inside the
  // file); the tensor's own checksum decides whether they are the ones that were written.
  const fs::path path = step_dir_ / entry.shard;
  std::lock_guard<std::mutex> lock(state_->mutex);
  StatusOr<int> fd = state_->direct_fd(path, entry.shard);
  if (!fd.is_ok()) return fd.status();
  Xxh3 hash;
  std::unique_ptr<char[]> unused;
  if (Status s = read_range(
          fd.value(), *entry.offset, *entry.offset + entry.nbytes, static_cast<char*>(destination), unused,
          std::uint64_t{8} << 20, [&](const char* p, std::size_t n) { hash.update(p, n); }, path, entry.name);
      !s.is_ok()) {
    return s;
  }
  const std::uint64_t checksum = hash.digest();  // of nothing, for an empty tensor
  if (checksum != entry.checksum) {
    return data_loss(path, entry.name,
                     "checksum " + checksum_hex(checksum) + " does not match manifest " + checksum_hex(entry.checksum));
  }
  return Status::ok();
}

Status CheckpointReader::read_via_hdf5(const IndexEntry& entry, void* destination) const {
  const std::string& name = entry.name;
  const fs::path path = step_dir_ / entry.shard;
  const ShardSummary* summary = nullptr;
  for (const ShardSummary& s : manifest_.shards) {
    if (s.file == entry.shard) summary = &s;
  }
  if (summary == nullptr) return data_loss(path, name, "shard not in the manifest");  // parse_manifest prevents this

  std::lock_guard<std::mutex> lock(state_->mutex);
  detail::silence_errors();
  State::Shard& shard = state_->shards[entry.shard];
  if (Status s = state_->verify_shard(path, *summary, shard); !s.is_ok()) return s;
  if (!shard.file.valid()) {
    // Read-only over our buffer: HDF5 neither copies nor frees it.
    shard.view = detail::FileImage{shard.image.get(), shard.size};
    shard.file = detail::open_image_read_only(shard.view);
    if (!shard.file.valid()) return hdf5_loss(path, "", "H5Fopen (verified image)");
  }

  H5Handle dset = detail::dataset_handle(H5Dopen2(shard.file.get(), name.c_str(), H5P_DEFAULT));
  if (!dset.valid()) return hdf5_loss(path, name, "H5Dopen2");

  // dtype: the stored HDF5 type must be exactly the one this dtype is written as.
  H5Handle expected_type = detail::make_datatype(entry.dtype);
  H5Handle file_type = detail::datatype_handle(H5Dget_type(dset.get()));
  if (!expected_type.valid() || !file_type.valid()) return hdf5_loss(path, name, "H5Dget_type");
  const htri_t same = H5Tequal(file_type.get(), expected_type.get());
  if (same < 0) return hdf5_loss(path, name, "H5Tequal");
  if (same == 0) {
    return data_loss(path, name,
                     std::string("stored element type is not ") + dtype_name(entry.dtype) + " as the manifest says");
  }

  // shape
  H5Handle space = detail::dataspace_handle(H5Dget_space(dset.get()));
  if (!space.valid()) return hdf5_loss(path, name, "H5Dget_space");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return hdf5_loss(path, name, "H5Sget_simple_extent_ndims");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    return hdf5_loss(path, name, "H5Sget_simple_extent_dims");
  }
  const std::vector<std::int64_t> shape(dims.begin(), dims.end());
  if (shape != entry.shape) {
    return data_loss(path, name,
                     "stored shape " + shape_text(shape) + " differs from manifest " + shape_text(entry.shape));
  }

  // bytes: the stored extent must hold exactly nbytes (contiguous, no filters).
  if (entry.nbytes > 0) {
    const hsize_t stored = H5Dget_storage_size(dset.get());
    if (stored != entry.nbytes) {
      return data_loss(path, name,
                       "stores " + std::to_string(stored) + " bytes, manifest says " + std::to_string(entry.nbytes));
    }
  }

  if (entry.offset) {
    const haddr_t address = H5Dget_offset(dset.get());
    if (address == HADDR_UNDEF || address != *entry.offset) {
      return data_loss(path, name,
                       "HDF5 stores the data at " +
                           (address == HADDR_UNDEF ? std::string("no address") : "byte " + std::to_string(address)) +
                           ", the manifest's offset is " + std::to_string(*entry.offset));
    }
  }
  if (entry.nbytes > 0 && H5Dread(dset.get(), expected_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, destination) < 0) {
    return hdf5_loss(path, name, "H5Dread");
  }
  const std::uint64_t checksum = xxh3_64(entry.nbytes > 0 ? destination : "", entry.nbytes);
  if (checksum != entry.checksum) {
    return data_loss(path, name,
                     "checksum " + checksum_hex(checksum) + " does not match manifest " + checksum_hex(entry.checksum));
  }
  return Status::ok();
}

Status CheckpointReader::read_all_into(const std::vector<ReadTarget>& targets) const {
  std::map<std::string, std::map<std::string, const ReadTarget*>> by_shard;
  for (const ReadTarget& t : targets) {
    const auto found = manifest_.tensors.find(t.name);
    if (found == manifest_.tensors.end()) {
      return Status(StatusCode::kNotFound, step_dir_.string() + ": checkpoint has no tensor '" + t.name + "'");
    }
    if (t.nbytes != found->second.nbytes) {
      return Status(StatusCode::kInvalidArgument, (step_dir_ / found->second.shard).string() + ": tensor '" + t.name +
                                                      "' has " + std::to_string(found->second.nbytes) +
                                                      " bytes, the destination " + std::to_string(t.nbytes));
    }
    by_shard[found->second.shard][t.name] = &t;
  }
  for (const ShardSummary& shard : manifest_.shards) {
    const auto wanted = by_shard.find(shard.file);
    if (wanted == by_shard.end()) continue;
    bool all_placed = true;
    for (const auto& [name, entry] : manifest_.tensors) {
      if (entry.shard == shard.file && entry.nbytes > 0 && !entry.offset) all_placed = false;
    }
    if (all_placed) {
      if (Status s = stream_shard(shard, wanted->second); !s.is_ok()) return s;
      continue;
    }
    for (const auto& [name, target] : wanted->second) {
      if (Status s = read_into(name, target->destination, target->nbytes); !s.is_ok()) return s;
    }
  }
  return Status::ok();
}

Status CheckpointReader::stream_shard(const ShardSummary& shard,
                                      const std::map<std::string, const ReadTarget*>& wanted) const {
  const fs::path path = step_dir_ / shard.file;
  std::vector<const IndexEntry*> regions;
  for (const auto& [name, entry] : manifest_.tensors) {
    if (entry.shard == shard.file && entry.nbytes > 0) regions.push_back(&entry);
  }
  std::sort(regions.begin(), regions.end(),
            [](const IndexEntry* a, const IndexEntry* b) { return *a->offset < *b->offset; });

  std::lock_guard<std::mutex> lock(state_->mutex);
  StatusOr<int> fd = state_->direct_fd(path, shard.file);
  if (!fd.is_ok()) return fd.status();
  constexpr std::uint64_t kChunk = std::uint64_t{16} << 20;  // large reads, hashed while in the cache
  std::unique_ptr<char[]> scratch;
  Xxh3 file_hash;
  std::uint64_t pos = 0;
  // Reads [pos, end) into `out` (or the scratch buffer when null), feeding the file's hash.
  auto read_span = [&](std::uint64_t end, char* out, const std::string& tensor) -> Status {
    Status status = read_range(
        fd.value(), pos, end, out, scratch, kChunk, [&](const char* p, std::size_t n) { file_hash.update(p, n); }, path,
        tensor);
    if (status.is_ok()) pos = end;
    return status;
  };
  for (const IndexEntry* entry : regions) {
    if (*entry->offset < pos) {
      return data_loss(path, entry->name, "the manifest places it on bytes that another tensor already uses");
    }
    if (Status s = read_span(*entry->offset, nullptr, ""); !s.is_ok()) return s;
    const auto target = wanted.find(entry->name);
    if (target == wanted.end()) {
      if (Status s = read_span(*entry->offset + entry->nbytes, nullptr, entry->name); !s.is_ok()) return s;
      continue;
    }
    // No second hash of the tensor alone: the file's hash covers its bytes, and the manifest's
    // own checksum covers where they are (offset) — a wrong offset recorded by the writer
    // would have made its whole-file checksum, computed from those offsets, disagree too.
    if (Status s =
            read_span(*entry->offset + entry->nbytes, static_cast<char*>(target->second->destination), entry->name);
        !s.is_ok()) {
      return s;
    }
  }
  if (Status s = read_span(shard.bytes, nullptr, ""); !s.is_ok()) return s;
  char extra = 0;
  if (::pread(fd.value(), &extra, 1, static_cast<off_t>(shard.bytes)) > 0) {
    return data_loss(path, "", "is longer than the manifest's " + std::to_string(shard.bytes) + " bytes (replaced?)");
  }
  if (file_hash.digest() != shard.checksum) {
    return data_loss(path, "",
                     "file checksum " + checksum_hex(file_hash.digest()) + " does not match manifest " +
                         checksum_hex(shard.checksum));
  }
  // Empty tensors have no bytes to read; their checksum is that of nothing.
  for (const auto& [name, target] : wanted) {
    const IndexEntry& entry = manifest_.tensors.at(name);
    if (entry.nbytes == 0 && entry.checksum != xxh3_64("", 0)) {
      return data_loss(path, name, "checksum " + checksum_hex(entry.checksum) + " is not that of an empty tensor");
    }
  }
  return Status::ok();
}

StatusOr<TensorData> CheckpointReader::read(const std::string& name) const {
  const auto found = manifest_.tensors.find(name);
  if (found == manifest_.tensors.end()) {
    return Status(StatusCode::kNotFound, step_dir_.string() + ": checkpoint has no tensor '" + name + "'");
  }
  TensorData out;
  out.dtype = found->second.dtype;
  out.shape = found->second.shape;
  out.bytes.resize(found->second.nbytes);
  if (Status s = read_into(name, out.bytes.data(), out.bytes.size()); !s.is_ok()) return s;
  return out;
}

Status CheckpointReader::verify_all() const {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (const ShardSummary& summary : manifest_.shards) {
      if (Status s = state_->verify_shard(step_dir_ / summary.file, summary, state_->shards[summary.file]);
          !s.is_ok()) {
        return s;
      }
    }
  }
  // Through HDF5 even where the manifest records offsets: this also proves that HDF5 (and so
  // h5py and h5dump) sees each tensor where the manifest says it is.
  std::vector<std::uint8_t> bytes;
  for (const auto& [name, entry] : manifest_.tensors) {
    bytes.resize(entry.nbytes);
    if (Status s = read_via_hdf5(entry, bytes.data()); !s.is_ok()) return s;
  }
  return Status::ok();
}

}  // namespace tenax::storage
