// Private: RAII ownership of HDF5 identifiers, the HDF5 datatype of each DType, and error
// stack helpers. Thread-safety: handles are single-owner values; the helpers act on the
// calling thread's HDF5 error stack (thread-local in the thread-safe build).
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <string>
#include <utility>

#include "tenax/storage/tensor_bytes.h"

namespace tenax::storage::detail {

/// Move-only owner of one hid_t. The destructor closes and ignores failure; call close() where
/// the result matters (H5Fclose flushes, so it can fail with ENOSPC).
class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);

  H5Handle() = default;
  /// Takes ownership of `id` (a negative id means "none": HDF5's failure value).
  H5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~H5Handle() { reset(); }
  H5Handle(H5Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}
  H5Handle& operator=(H5Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      closer_ = other.closer_;
    }
    return *this;
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;

  /// Whether an identifier is held.
  bool valid() const { return id_ >= 0; }
  /// The identifier, still owned.
  hid_t get() const { return id_; }
  /// Closes now and returns HDF5's verdict (0 or more on success); no-op when empty. After a
  /// failure the identifier is dropped without a second close: HDF5 keeps such an object
  /// half-closed, and closing it again crashes inside HDF5 (seen with 1.10.8 after EFBIG).
  herr_t close() {
    if (!valid()) return 0;
    const herr_t result = closer_(id_);
    id_ = H5I_INVALID_HID;
    return result;
  }

 private:
  void reset() noexcept {
    if (valid()) static_cast<void>(closer_(id_));
    id_ = H5I_INVALID_HID;
  }

  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

inline H5Handle file_handle(hid_t id) { return H5Handle(id, &H5Fclose); }
inline H5Handle dataset_handle(hid_t id) { return H5Handle(id, &H5Dclose); }
inline H5Handle dataspace_handle(hid_t id) { return H5Handle(id, &H5Sclose); }
inline H5Handle datatype_handle(hid_t id) { return H5Handle(id, &H5Tclose); }
inline H5Handle attribute_handle(hid_t id) { return H5Handle(id, &H5Aclose); }
inline H5Handle plist_handle(hid_t id) { return H5Handle(id, &H5Pclose); }

/// Turns off HDF5's automatic printing of the error stack for the calling thread (the setting
/// is per thread in the thread-safe build, so every entry point calls this).
void silence_errors();

/// The calling thread's HDF5 error stack as one line (innermost cause last), or "" if empty.
/// Clears the stack.
std::string error_text();

/// A new datatype handle for `dtype` (bf16/fp16 are custom little-endian float types).
/// Invalid handle on failure.
H5Handle make_datatype(DType dtype);

/// A file-access property list with the strong close degree (H5Fclose closes every object).
H5Handle make_strong_fapl();

/// An HDF5 file held in memory by its owner.
struct FileImage {
  void* data = nullptr;
  std::size_t size = 0;
};

/// Opens, read-only, the HDF5 file whose bytes `image` describes. `image` and its bytes are
/// borrowed: both must outlive the file and every object opened from it. HDF5 neither copies
/// nor frees the bytes. (HDF5's own H5LTopen_file_image leaks its bookkeeping on every call in
/// 1.10.8, seen with LeakSanitizer; these are the same callbacks without that.) Invalid handle
/// on failure.
H5Handle open_image_read_only(FileImage& image);

}  // namespace tenax::storage::detail
