// The two tensorflow.Event protobuf messages a scalar event file needs, encoded by hand (no
// protobuf dependency), byte for byte as Python protobuf serialises them:
//
//   Event   { double wall_time = 1; int64 step = 2;
//             oneof what { string file_version = 3; Summary summary = 5; }
//             SourceMetadata source_metadata = 10; }
//   SourceMetadata { string writer = 1; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; oneof value { float simple_value = 2; } }
//
// Fields in field-number order; proto3 rules: a zero wall_time or step and an empty tag are not
// written, oneof members always are. Thread-safety: stateless.
//
//   std::string payload = encode_scalar_event(wall_time, 100, "train/loss", 0.25f);
//
// Private to the SDK (under sdk/src: not installed).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tenax::sdk::tensorboard {

/// The version TensorBoard expects in the first event of a file.
inline constexpr std::string_view kFileVersion = "brain.Event:2";

/// Event{wall_time, file_version "brain.Event:2", source_metadata{writer}} — the first record
/// of every event file. TensorBoard's own writer names itself in source_metadata (tensorboard
/// 2.x); an empty `source_writer` leaves source_metadata out, as TensorFlow's C++ writer does.
std::string encode_file_version_event(double wall_time, std::string_view source_writer);

/// Event{wall_time, step, summary{value{tag, simple_value}}}.
std::string encode_scalar_event(double wall_time, std::int64_t step, std::string_view tag, float value);

}  // namespace tenax::sdk::tensorboard
