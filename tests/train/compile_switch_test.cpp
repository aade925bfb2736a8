// train.compile: auto, on or off, with YAML's booleans read as on and off
// (configs written before auto existed said true or false); anything else
// is refused naming the file, the key and the line.
#include <gtest/gtest.h>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

std::string compile_value_of(const TempDir& tmp, const std::string& value) {
  const fs::path file = tmp / "compile.yaml";
  write_text(file, "train:\n  steps: 2\n  compile: " + value + "\n");
  return read_train_config_unchecked(file).train.compile;
}

TEST(CompileSwitch, ReadsAutoOnOffAndBooleans) {
  TempDir tmp("compile_switch");
  EXPECT_EQ(TrainConfig{}.train.compile, "off");  // the default
  EXPECT_EQ(compile_value_of(tmp, "auto"), "auto");
  EXPECT_EQ(compile_value_of(tmp, "on"), "on");
  EXPECT_EQ(compile_value_of(tmp, "off"), "off");
  EXPECT_EQ(compile_value_of(tmp, "true"), "on");
  EXPECT_EQ(compile_value_of(tmp, "false"), "off");
  EXPECT_EQ(compile_value_of(tmp, "yes"), "on");
  EXPECT_EQ(compile_value_of(tmp, "\"off\""), "off");
}

TEST(CompileSwitch, WritesWhatItReadsBack) {
  TempDir tmp("compile_switch_yaml");
  TrainConfig c;
  c.train.compile = "auto";
  write_text(tmp / "saved.yaml", c.to_yaml());
  EXPECT_EQ(read_train_config_unchecked(tmp / "saved.yaml").train.compile, "auto");
}

TEST(CompileSwitch, RefusesOtherValuesNamingFileKeyAndLine) {
  TempDir tmp("compile_switch_bad");
  for (const std::string value : {"maybe", "2", "[on]"}) {
    std::string message;
    try {
      compile_value_of(tmp, value);
    } catch (const Error& e) {
      message = e.what();
    }
    ASSERT_FALSE(message.empty()) << value << " was accepted";
    EXPECT_NE(message.find((tmp / "compile.yaml").string()), std::string::npos) << message;
    EXPECT_NE(message.find("'train.compile'"), std::string::npos) << message;
    EXPECT_NE(message.find("line 3"), std::string::npos) << message;
    EXPECT_NE(message.find("auto, on or off"), std::string::npos) << message;
  }
}

TEST(CompileSwitch, RefusesABadOverrideNamingIt) {
  std::string message;
  try {
    load_train_config("", {"train.compile=sometimes"});
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("--set train.compile=sometimes"), std::string::npos) << message;
  EXPECT_NE(message.find("auto, on or off"), std::string::npos) << message;
}

}  // namespace
}  // namespace lt::train::testing
