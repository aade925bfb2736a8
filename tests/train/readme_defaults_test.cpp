// README's table of every config key and its default is the config's own:
// the fenced block after the marker line equals TrainConfig{}.to_yaml(), so
// a key added or a default changed without the README fails here.
#include <gtest/gtest.h>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

TEST(ReadmeDefaults, TheKeyTableIsTheConfigsDefaults) {
  const std::string readme = read_text(fs::path(LT_SOURCE_DIR) / "README.md");
  const std::string marker = "<!-- every key and its default: TrainConfig{}.to_yaml() -->";
  const size_t at = readme.find(marker);
  ASSERT_NE(at, std::string::npos) << "README.md lacks the marker line " << marker;
  const size_t open = readme.find("```yaml\n", at);
  ASSERT_NE(open, std::string::npos);
  const size_t begin = open + 8;
  const size_t close = readme.find("```", begin);
  ASSERT_NE(close, std::string::npos);
  const std::string want = TrainConfig{}.to_yaml();
  EXPECT_EQ(readme.substr(begin, close - begin), want)
      << "README.md's defaults block should read:\n"
      << want;
}

}  // namespace
}  // namespace lt::train::testing
