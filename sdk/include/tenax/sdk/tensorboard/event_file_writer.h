// EventFileWriter: scalars into a TensorBoard event file, without TensorFlow or protobuf.
//
// Creates <dir>/events.out.tfevents.<unix seconds, 10 digits>.<hostname> (TensorFlow's C++
// naming; a ".<n>" suffix is added if that name exists already, e.g. two writers started in the
// same second) and writes the file_version event first. Every add_scalar is one TFRecord
// written with one write(2): there is no user-space buffer, so each event is in the file (and
// visible to a running TensorBoard) when the call returns. Usable without the Trainer.
// Thread-safety: not thread-safe; use one writer per thread or lock around it.
//
//   tenax::sdk::tensorboard::EventFileWriter tb("runs/demo");
//   tb.add_scalar("train/loss", 0.42f, /*step=*/10);
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>

namespace tenax::sdk::detail {
class AppendOnlyFile;
}

namespace tenax::sdk::tensorboard {

/// What Tenax's event files name as their writer (Event.source_metadata.writer).
inline constexpr const char* kSourceWriter = "tenax";

/// Seconds since the Unix epoch, with sub-second precision (an Event's wall_time).
double wall_time_now();

class EventFileWriter {
 public:
  /// Creates `dir` (and parents) and the event file, whose file_version event carries
  /// `wall_time` and `source_writer` ("" : none); the file name carries the whole seconds of
  /// `wall_time`. Throws StorageError naming the path.
  explicit EventFileWriter(const std::filesystem::path& dir, double wall_time = wall_time_now(),
                           std::string_view source_writer = kSourceWriter);
  EventFileWriter(EventFileWriter&&) noexcept;
  EventFileWriter& operator=(EventFileWriter&&) noexcept;
  ~EventFileWriter();

  /// Appends one scalar event. Throws StorageError naming the file when the write fails.
  void add_scalar(std::string_view tag, float value, std::int64_t step, double wall_time = wall_time_now());
  /// The event file.
  const std::filesystem::path& path() const;

 private:
  std::unique_ptr<detail::AppendOnlyFile> file_;
};

}  // namespace tenax::sdk::tensorboard
