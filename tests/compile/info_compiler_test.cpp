// `lazytrain info --json` reports the fusion compiler as the build has it:
// its plugin beside the program, loaded, with the version of the MLIR
// installed (llvm-config-19 when present).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "compile/compiler_info.h"
#include "support/scoped_env.h"
#include "train/train_helpers.h"

namespace lt::compile {
namespace {

using lt::testing::ScopedEnv;
using train::testing::run_program;
using train::testing::TempDir;

std::string command_output(const char* command) {
  std::string out;
  if (FILE* pipe = ::popen(command, "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, pipe)) out += buf;
    ::pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

TEST(InfoCommand, ReportsTheFusionCompiler) {
  TempDir tmp("info_compiler");
  ScopedEnv plugin("LT_COMPILER_PLUGIN", nullptr);  // the one beside the program
  std::string output;
  ASSERT_EQ(run_program({"info", "--json"}, tmp / "info.log", &output), 0) << output;
  const nlohmann::json compiler = nlohmann::json::parse(output).at("compiler");
  const CompilerInfo built = compiler_info();
  ASSERT_EQ(compiler.at("built").get<bool>(), built.built_in);
  if (!built.built_in) {
    EXPECT_FALSE(compiler.at("loaded").get<bool>());
    EXPECT_TRUE(compiler.at("mlir_version").is_null());
    EXPECT_TRUE(compiler.at("targets").empty());
    return;
  }
  // Built: the plugin lies beside the program and loads.
  ASSERT_TRUE(compiler.at("loaded").get<bool>()) << compiler.dump();
  EXPECT_TRUE(compiler.at("error").is_null());
  EXPECT_EQ(compiler.at("plugin").get<std::string>(),
            (train::testing::program().parent_path() / "liblazytrain_mlir.so").string());
  const std::vector<std::string> targets = compiler.at("targets");
  EXPECT_NE(std::find(targets.begin(), targets.end(), "cpu"), targets.end()) << compiler.dump();
  const std::string installed = command_output("llvm-config-19 --version 2>/dev/null");
  if (installed.empty()) GTEST_SKIP() << "llvm-config-19 is not in PATH to compare the version";
  EXPECT_EQ(compiler.at("mlir_version").get<std::string>(), installed);
}

}  // namespace
}  // namespace lt::compile
