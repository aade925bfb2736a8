// The fusion compiler as a plugin (compile/plugin_loader.h): lazytrain
// links no MLIR or LLVM library, so it starts where they are missing; a
// plugin that cannot load (LT_COMPILER_PLUGIN pointed at a missing or a
// damaged file, or at one whose libMLIR is not found, as on a machine
// without MLIR) is reported with the file and dlerror, `train.compile: auto` then trains with the
// hand-written kernels (bit for bit the losses of `off`) and says so once, and `on` stops before
// the first step.
#include <gtest/gtest.h>

#include <cstdio>

#include "compile/compiler_info.h"
#include "support/scoped_env.h"
#include "train/train_helpers.h"

namespace lt::compile {
namespace {

namespace fs = std::filesystem;
using lt::testing::ScopedEnv;
using train::testing::program;
using train::testing::read_metrics;
using train::testing::run_program;
using train::testing::TempDir;

std::string command_output(const std::string& command) {
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, pipe)) out += buf;
    ::pclose(pipe);
  }
  return out;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

nlohmann::json compiler_of_info(const fs::path& log) {
  std::string output;
  EXPECT_EQ(run_program({"info", "--json"}, log, &output), 0) << output;
  // stdout is the JSON; nothing else is printed on success.
  return nlohmann::json::parse(output).at("compiler");
}

// The libraries the dynamic linker loads for lazytrain and for this test
// program (ldd) include neither MLIR's nor LLVM's.
TEST(CompilerPlugin, ProgramsLinkNoMlirOrLlvm) {
  for (const fs::path& file : {program(), fs::read_symlink("/proc/self/exe")}) {
    const std::string libraries = command_output("ldd " + file.string() + " 2>&1");
    if (libraries.find("libc.so") == std::string::npos) GTEST_SKIP() << "no ldd: " << libraries;
    EXPECT_EQ(libraries.find("libMLIR"), std::string::npos) << file << ":\n" << libraries;
    EXPECT_EQ(libraries.find("libLLVM"), std::string::npos) << file << ":\n" << libraries;
  }
}

TEST(CompilerPlugin, InfoSaysWhichFileWasMissing) {
  // compiler_info() loads the plugin once a process: ask before pointing
  // LT_COMPILER_PLUGIN elsewhere, or this process keeps the failed load
  // (the later tests of this binary, run in one process, would fall back).
  const bool built_in = compiler_info().built_in;
  TempDir tmp("plugin_missing");
  const std::string missing = (tmp / "nowhere" / "liblazytrain_mlir.so").string();
  ScopedEnv plugin("LT_COMPILER_PLUGIN", missing.c_str());
  const nlohmann::json compiler = compiler_of_info(tmp / "info.log");
  EXPECT_EQ(compiler.at("built").get<bool>(), built_in);
  EXPECT_FALSE(compiler.at("loaded").get<bool>());
  EXPECT_TRUE(compiler.at("mlir_version").is_null());
  EXPECT_TRUE(compiler.at("targets").empty());
  if (!built_in) return;  // "built without MLIR" is the reason then
  EXPECT_EQ(compiler.at("plugin").get<std::string>(), missing);
  const std::string error = compiler.at("error").get<std::string>();
  EXPECT_NE(error.find(missing), std::string::npos) << error;
  EXPECT_NE(error.find("LT_COMPILER_PLUGIN"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;  // dlerror's words
}

TEST(CompilerPlugin, InfoGivesDlerrorForADamagedPlugin) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  TempDir tmp("plugin_damaged");
  const fs::path damaged = tmp / "liblazytrain_mlir.so";
  // Longer than an ELF header, so that the loader reads it as one.
  train::testing::write_text(damaged, std::string(256, 'x'));
  ScopedEnv plugin("LT_COMPILER_PLUGIN", damaged.c_str());
  const nlohmann::json compiler = compiler_of_info(tmp / "info.log");
  EXPECT_FALSE(compiler.at("loaded").get<bool>());
  const std::string error = compiler.at("error").get<std::string>();
  EXPECT_NE(error.find(damaged.string()), std::string::npos) << error;
  EXPECT_NE(error.find("ELF"), std::string::npos) << error;  // "invalid ELF header"
}

// As on a machine without MLIR: a copy of the plugin whose search path
// for libMLIR (its RUNPATH, the only way it finds it here) leads nowhere.
TEST(CompilerPlugin, InfoNamesTheMissingMlirLibrary) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  const fs::path built = program().parent_path() / "liblazytrain_mlir.so";
  std::string bytes = train::testing::read_text(built);
  const std::string runpath = "/usr/lib/llvm-19/lib";  // Debian's, as the build found it
  const std::string nowhere = "/nowhere/llvm-19/lib";  // the same length: a byte patch
  ASSERT_EQ(runpath.size(), nowhere.size());
  size_t patched = 0;
  for (size_t at = bytes.find(runpath); at != std::string::npos; at = bytes.find(runpath, at)) {
    bytes.replace(at, runpath.size(), nowhere);
    ++patched;
  }
  if (patched == 0) GTEST_SKIP() << built << " does not find MLIR through " << runpath;
  TempDir tmp("plugin_no_mlir");
  const fs::path copy = tmp / "liblazytrain_mlir.so";
  train::testing::write_text(copy, bytes);
  ScopedEnv plugin("LT_COMPILER_PLUGIN", copy.c_str());
  const nlohmann::json compiler = compiler_of_info(tmp / "info.log");
  if (compiler.at("loaded").get<bool>()) GTEST_SKIP() << "libMLIR is on the system's library path";
  const std::string error = compiler.at("error").get<std::string>();
  EXPECT_NE(error.find(copy.string()), std::string::npos) << error;
  EXPECT_NE(error.find("libMLIR.so"), std::string::npos) << error;  // what dlopen missed
}

// A demo run of a few steps with `compile` as train.compile; its output.
int train_demo(const TempDir& tmp, const std::string& name, const std::string& compile,
               std::string* output) {
  return run_program({"train", "--set", "train.steps=2", "--set", "train.eval_every=0", "--set",
                      "train.compile=" + compile, "--set", "out.dir=" + (tmp / name).string()},
                     tmp / (name + ".log"), output, 120);
}

std::vector<double> losses(const fs::path& out) {
  return train::testing::field(read_metrics(out), "loss");
}

TEST(CompilerPlugin, AutoWithoutThePluginTrainsUnfusedAndSaysSoOnce) {
  TempDir tmp("plugin_auto");
  std::string off_output, auto_output;
  ASSERT_EQ(train_demo(tmp, "off", "off", &off_output), 0) << off_output;
  const std::string missing = (tmp / "nowhere" / "liblazytrain_mlir.so").string();
  {
    ScopedEnv plugin("LT_COMPILER_PLUGIN", missing.c_str());
    ASSERT_EQ(train_demo(tmp, "auto", "auto", &auto_output), 0) << auto_output;
  }
  EXPECT_EQ(count(auto_output, "train.compile auto: running the hand-written kernels"), 1u)
      << auto_output;
  if (compiler_info().built_in) {
    EXPECT_EQ(count(auto_output, missing), 1u) << auto_output;
  }
  EXPECT_EQ(count(auto_output, "chains fused"), 0u) << "no compiled blocks:\n" << auto_output;
  EXPECT_EQ(count(off_output, "train.compile"), 0u) << off_output;
  // The hand-written kernels: the losses of train.compile off, bit for bit.
  const std::vector<double> expected = losses(tmp / "off");
  ASSERT_EQ(expected.size(), 2u);
  EXPECT_EQ(losses(tmp / "auto"), expected);
}

TEST(CompilerPlugin, OnWithoutThePluginStopsBeforeTraining) {
  const bool built_in = compiler_info().built_in;  // before LT_COMPILER_PLUGIN moves
  TempDir tmp("plugin_on");
  const std::string missing = (tmp / "nowhere" / "liblazytrain_mlir.so").string();
  ScopedEnv plugin("LT_COMPILER_PLUGIN", missing.c_str());
  std::string output;
  EXPECT_NE(train_demo(tmp, "on", "on", &output), 0) << output;
  EXPECT_NE(output.find("train.compile"), std::string::npos) << output;
  EXPECT_NE(output.find(built_in ? missing : "without MLIR"), std::string::npos) << output;
  EXPECT_TRUE(losses(tmp / "on").empty()) << "no step ran";
}

// With the plugin where it belongs (beside the program), auto compiles
// the blocks but keeps the optimizer's hand-written updates (the compiled
// ones are slower: bench/RESULTS.md); kernels go to a scratch cache folder.
TEST(CompilerPlugin, AutoWithThePluginCompilesTheBlocks) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  TempDir tmp("plugin_auto_loaded");
  ScopedEnv plugin("LT_COMPILER_PLUGIN", nullptr);
  ScopedEnv cache("XDG_CACHE_HOME", (tmp / "cache").c_str());
  std::string output;
  ASSERT_EQ(train_demo(tmp, "auto", "auto", &output), 0) << output;
  EXPECT_EQ(count(output, "train.compile auto: blocks run through the fusion compiler"), 1u)
      << output;
  EXPECT_NE(output.find("chains fused"), std::string::npos) << output;
  // Not the optimizer's updates (train/compile_setup.h): none is counted in
  // the log after the second step.
  EXPECT_EQ(count(output, "the optimizer runs its hand-written updates"), 1u) << output;
  EXPECT_EQ(output.find("parameter updates by compiled optimizer kernels"), std::string::npos)
      << output;
  EXPECT_EQ(losses(tmp / "auto").size(), 2u);
}

// The libraries a running training maps, read from /proc/<pid>/maps once
// its first step is written.
std::string maps_during_training(const TempDir& tmp, const std::string& compile) {
  const fs::path out = tmp / compile;
  train::testing::Child child(
      {"train", "--set", "train.steps=1000", "--set", "train.eval_every=0", "--set",
       "train.compile=" + compile, "--set", "out.dir=" + out.string()},
      tmp / (compile + ".log"));
  if (!train::testing::wait_for_lines(child, out / "metrics.jsonl", 1, 120)) {
    ADD_FAILURE() << "no step: " << child.output();
    return "";
  }
  return train::testing::read_text("/proc/" + std::to_string(child.pid()) + "/maps");
}

// Loaded only when used: a run with train.compile off never maps the
// plugin or MLIR; one that compiles maps both.
TEST(CompilerPlugin, OnlyARunThatCompilesLoadsIt) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  TempDir tmp("plugin_maps");
  ScopedEnv plugin("LT_COMPILER_PLUGIN", nullptr);
  ScopedEnv cache("XDG_CACHE_HOME", (tmp / "cache").c_str());
  const std::string off = maps_during_training(tmp, "off");
  EXPECT_EQ(off.find("liblazytrain_mlir"), std::string::npos) << off;
  EXPECT_EQ(off.find("libMLIR"), std::string::npos) << off;
  const std::string compiled = maps_during_training(tmp, "on");
  EXPECT_NE(compiled.find("liblazytrain_mlir"), std::string::npos) << compiled;
  EXPECT_NE(compiled.find("libMLIR"), std::string::npos) << compiled;
}

}  // namespace
}  // namespace lt::compile
