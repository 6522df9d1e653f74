// The TensorBoard event writer: CRC-32C check values, the bytes of an event file against one
// written by tensorboard's own EventFileWriter (tests/sdk/goldens, made by
// tools/goldens/tensorboard_goldens.py), and the file's name.
#include "tenax/sdk/tensorboard/event_file_writer.h"

#include <unistd.h>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sdk/callbacks/callback_test_support.h"
#include "sdk/tensorboard_records.h"
#include "tensorboard/crc32c.h"
#include "tensorboard/event_proto.h"

namespace tenax::sdk {
namespace {

namespace tb = tensorboard;
using testing::decode_scalar;
using testing::read_file;
using testing::records_of;
using testing::Scalar;

TEST(SdkTensorBoardCrc32c, StandardCheckValues) {
  EXPECT_EQ(tb::crc32c("123456789"), 0xE3069283u);  // the CRC catalogue's check value
  EXPECT_EQ(tb::crc32c(""), 0u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros and of ones.
  EXPECT_EQ(tb::crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(tb::crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
}

nlohmann::json golden_scalars() {
  return nlohmann::json::parse(testing::read_file(std::string(TENAX_SDK_GOLDENS_DIR) + "/tensorboard_scalars.json"));
}

class SdkTensorBoardEventFile : public testing::CallbackDirTest {};

TEST_F(SdkTensorBoardEventFile, EventFileEqualsTensorBoardsByteForByte) {
  const nlohmann::json golden = golden_scalars();
  const std::string expected =
      read_file(std::string(TENAX_SDK_GOLDENS_DIR) + "/" + golden["events_file"].get<std::string>());
  ASSERT_FALSE(expected.empty());

  std::filesystem::path path;
  {
    // tensorboard's writer names itself in the file_version event; Tenax's says "tenax" unless
    // told otherwise.
    tb::EventFileWriter writer(dir_, golden["file_version_wall_time"].get<double>(),
                               golden["file_version_source_writer"].get<std::string>());
    for (const auto& s : golden["scalars"]) {
      writer.add_scalar(s["tag"].get<std::string>(), static_cast<float>(s["value"].get<double>()),
                        s["step"].get<std::int64_t>(), s["wall_time"].get<double>());
    }
    path = writer.path();
  }
  const std::string actual = read_file(path);
  // Record by record first, for a failure that says which one differs.
  const auto want = records_of(expected);
  const auto got = records_of(actual);
  ASSERT_EQ(got.size(), golden["scalars"].size() + 1);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "record " << i;
  EXPECT_EQ(actual, expected);
  // The decoder agrees with the inputs (so the comparison above is about the right bytes).
  for (std::size_t i = 0; i < golden["scalars"].size(); ++i) {
    const Scalar s = decode_scalar(got[i + 1]);
    EXPECT_EQ(s.tag, golden["scalars"][i]["tag"].get<std::string>());
    EXPECT_EQ(s.step, golden["scalars"][i]["step"].get<std::int64_t>());
  }
}

TEST_F(SdkTensorBoardEventFile, FileIsNamedAsTensorFlowsAndNeverReused) {
  char host[HOST_NAME_MAX + 1] = {};
  ASSERT_EQ(::gethostname(host, HOST_NAME_MAX), 0);
  tb::EventFileWriter a(dir_ / "nested" / "runs", 1700000000.75);
  tb::EventFileWriter b(dir_ / "nested" / "runs", 1700000000.25);  // same second
  EXPECT_EQ(a.path().filename().string(), std::string("events.out.tfevents.1700000000.") + host);
  EXPECT_EQ(b.path().filename().string(), std::string("events.out.tfevents.1700000000.") + host + ".1");
  // Each starts with its own file_version record.
  const auto records = records_of(read_file(b.path()));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0], tb::encode_file_version_event(1700000000.25, "tenax"));
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
}

}  // namespace
}  // namespace tenax::sdk
