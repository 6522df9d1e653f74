#include "tenax/sdk/tensorboard/event_file_writer.h"

#include <unistd.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <string>

#include "append_only_file.h"
#include "tenax/core/error.h"
#include "tensorboard/event_proto.h"
#include "tensorboard/tfrecord.h"

namespace tenax::sdk::tensorboard {
namespace {

std::string hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// TensorFlow's EventsWriter name: "events.out.tfevents.%010lld.%s".
std::string file_name(double wall_time) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(std::floor(wall_time)));
  return std::string("events.out.tfevents.") + seconds + "." + hostname();
}

}  // namespace

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventFileWriter::EventFileWriter(const std::filesystem::path& dir, double wall_time, std::string_view source_writer) {
  detail::create_directories_or_throw(dir, "TensorBoard logging");
  const std::string base = file_name(wall_time);
  for (int attempt = 0; !file_; ++attempt) {
    const std::filesystem::path path = dir / (attempt == 0 ? base : base + "." + std::to_string(attempt));
    if (auto created = detail::AppendOnlyFile::create_new(path)) {
      file_ = std::make_unique<detail::AppendOnlyFile>(std::move(*created));
    } else if (attempt == 1000) {
      throw StorageError("cannot create a TensorBoard event file in " + dir.string() + ": " + base +
                         " and its 1000 numbered variants exist");
    }
  }
  file_->append(frame_record(encode_file_version_event(wall_time, source_writer)));
}

EventFileWriter::EventFileWriter(EventFileWriter&&) noexcept = default;
EventFileWriter& EventFileWriter::operator=(EventFileWriter&&) noexcept = default;
EventFileWriter::~EventFileWriter() = default;

void EventFileWriter::add_scalar(std::string_view tag, float value, std::int64_t step, double wall_time) {
  file_->append(frame_record(encode_scalar_event(wall_time, step, tag, value)));
}

const std::filesystem::path& EventFileWriter::path() const { return file_->path(); }

}  // namespace tenax::sdk::tensorboard
