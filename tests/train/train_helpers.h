#pragma once
// Shared by the trainer tests: temp folders, tokens datasets, fixture
// configs, the out.dir tests' fixture, metrics.jsonl, EXPECT_MENTIONS, and
// running the lazytrain program as a child process (fork/exec, so a test
// can signal it).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "train/config.h"
#include "train/trainer.h"

// An error message (or log) that should contain `text`.
#define EXPECT_MENTIONS(message, text)               \
  EXPECT_NE((message).find(text), std::string::npos) \
      << "'" << (message) << "' lacks '" << (text) << "'"

namespace lt::train::testing {

namespace fs = std::filesystem;

inline fs::path fixture(const std::string& family) {
  return fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families" / family;
}

inline fs::path program() {
  return fs::path(LT_BINARY_DIR) / "lazytrain";
}

// A fresh folder under the system temp dir, named by tag and pid, removed
// at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(fs::temp_directory_path() / ("lt_train_" + tag + "_" + std::to_string(getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// Runs the test in `dir` as its current directory, and back.
class InDirectory {
 public:
  explicit InDirectory(const fs::path& dir) : before_(fs::current_path()) {
    fs::create_directories(dir);
    fs::current_path(dir);
  }
  ~InDirectory() { fs::current_path(before_); }
  InDirectory(const InDirectory&) = delete;
  InDirectory& operator=(const InDirectory&) = delete;

 private:
  fs::path before_;
};

inline void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A model folder holding only `family`'s fixture config.json with `layers`
// blocks (for model.init random), at `dir`.
inline void write_fixture_config(const fs::path& dir, const std::string& family, int layers) {
  nlohmann::json c = nlohmann::json::parse(read_text(fixture(family) / "config.json"));
  c["num_hidden_layers"] = layers;
  fs::create_directories(dir);
  write_text(dir / "config.json", c.dump());
}

// A tokens-format JSONL file: one {"input_ids", "labels"} row per sample;
// labels are aligned with input_ids (the trainer shifts them).
inline void write_tokens_jsonl(const fs::path& path, const std::vector<std::vector<int64_t>>& ids,
                               const std::vector<std::vector<int64_t>>& labels) {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    text += nlohmann::json{{"input_ids", ids[i]}, {"labels", labels[i]}}.dump() + "\n";
  }
  write_text(path, text);
}

// `rows` samples of different lengths (min_len .. min_len + rows - 1, in a
// shuffled order) with ids drawn from [0, vocab); the first two labels of
// every third row are masked (-100), as a prompt would be.
inline void write_random_tokens(const fs::path& path, int64_t rows, int64_t vocab, uint64_t seed,
                                int64_t min_len = 3) {
  Generator gen(seed);
  std::vector<std::vector<int64_t>> ids, labels;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t len = min_len + (r * 7) % rows;
    std::vector<int64_t> row, lab;
    for (int64_t i = 0; i < len; ++i) {
      row.push_back(static_cast<int64_t>(gen.below(static_cast<uint64_t>(vocab))));
      lab.push_back(r % 3 == 2 && i < 2 ? -100 : row.back());
    }
    ids.push_back(row);
    labels.push_back(lab);
  }
  write_tokens_jsonl(path, ids, labels);
}

// A config for a fixture model on a tokens file: pretrained weights, plain
// AdamW (weight decay 0.01 on every parameter), constant LR, no clipping,
// no intermediate saves. `overrides` are --set assignments applied on top.
inline TrainConfig fixture_config(const fs::path& model, const fs::path& data, const fs::path& out,
                                  const std::vector<std::string>& overrides = {}) {
  const fs::path file = out.parent_path() / (out.filename().string() + ".yaml");
  fs::create_directories(out.parent_path());
  std::ofstream(file) << "model:\n  path: \"" << model.string()
                      << "\"\n  init: pretrained\n"
                         "data:\n  path: \""
                      << data.string()
                      << "\"\n  format: tokens\n  pack: false\n"
                         "train:\n  steps: 4\n  batch_size: 2\n  grad_accum: 1\n  seq_len: 32\n"
                         "  grad_clip: 0\n  seed: 0\n  device: cpu\n  save_every: 0\n"
                         "optim:\n  name: adamw\n  lr: 1.0e-3\n  betas: [0.9, 0.999]\n"
                         "  eps: 1.0e-8\n  weight_decay: 0.01\n  no_decay: []\n"
                         "sched:\n  name: constant\n  warmup_steps: 0\n"
                         "out:\n  dir: \""
                      << out.string() << "\"\n";
  return load_train_config(file.string(), overrides);
}

inline TrainRunResult train_quietly(const TrainConfig& config, const std::string& resume = "") {
  TrainRunOptions options;
  options.resume = resume;
  options.sample_at_end = false;
  return run_training(config, options);
}

// The lt::Error a run of `config` stops with (a test failure if it does not).
inline std::string training_error(const TrainConfig& config, const std::string& resume = "") {
  try {
    train_quietly(config, resume);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "the run did not fail";
  return "";
}

// The fixture of the out.dir tests (out_dir_test.cpp, out_dir_errors_test.cpp):
// runs of the llama fixture on 8 short rows into out(), in a TempDir named
// by `tag`.
class OutDirRun : public ::testing::Test {
 protected:
  explicit OutDirRun(const std::string& tag) : tmp_(tag) {
    write_random_tokens(tmp_ / "data.jsonl", 8, 97, 5);
  }
  TrainConfig config(const std::vector<std::string>& overrides = {}) {
    return fixture_config(fixture("llama"), tmp_ / "data.jsonl", out(), overrides);
  }
  std::string error_of(const TrainConfig& c, const std::string& resume = "") {
    return training_error(c, resume);
  }
  fs::path out() const { return tmp_ / "out"; }
  TempDir tmp_;
};

// metrics.jsonl of a run, one object per line (a torn line fails the test).
inline std::vector<nlohmann::json> read_metrics(const fs::path& out_dir) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(out_dir / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      lines.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      ADD_FAILURE() << "metrics.jsonl: bad line '" << line << "': " << e.what();
    }
  }
  return lines;
}

inline std::vector<double> field(const std::vector<nlohmann::json>& lines, const char* name) {
  std::vector<double> v;
  for (const auto& l : lines) v.push_back(l.at(name).get<double>());
  return v;
}

inline size_t count_lines(const fs::path& path) {
  std::ifstream in(path);
  size_t n = 0;
  std::string line;
  while (std::getline(in, line)) n += !line.empty();
  return n;
}

// The program as a child process, stdout and stderr into `log`.
class Child {
 public:
  // Its stdout and stderr go to `log`; stdout to `stdout_fd` instead when
  // one is given, and stderr too when `stderr_too`.
  Child(const std::vector<std::string>& args, const fs::path& log, int stdout_fd = -1,
        bool stderr_too = false)
      : log_(log) {
    std::vector<std::string> argv_s = {program().string()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log_s = log.string();
    pid_ = fork();
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      const int fd = open(log_s.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
      }
      if (stdout_fd >= 0) dup2(stdout_fd, STDOUT_FILENO);
      if (stdout_fd >= 0 && stderr_too) dup2(stdout_fd, STDERR_FILENO);
      // As a terminal's shell starts it: an ignored signal stays ignored
      // through exec, this test process may ignore SIGPIPE, and CI may run
      // it under nohup (the SIGHUP tests then saw a launcher that rightly
      // kept nohup's SIGHUP ignored, and trained on).
      ::signal(SIGPIPE, SIG_DFL);
      ::signal(SIGHUP, SIG_DFL);
      execv(argv[0], argv.data());
      _exit(127);
    }
    EXPECT_GT(pid_, 0) << "fork failed";
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const { kill(pid_, sig); }
  bool running() {
    if (reaped_) return false;
    if (waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
    return !reaped_;
  }
  // The raw wait status; kills the child (and fails) after `timeout_s`.
  int wait(double timeout_s = 60) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (running()) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "lazytrain did not exit within " << timeout_s << " s; killing it";
        kill(pid_, SIGKILL);
        waitpid(pid_, &status_, 0);
        reaped_ = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return status_;
  }
  std::string output() const { return read_text(log_); }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
};

// Runs the program to the end; returns its exit code (-signal when killed).
inline int run_program(const std::vector<std::string>& args, const fs::path& log,
                       std::string* output = nullptr, double timeout_s = 60) {
  Child child(args, log);
  const int status = child.wait(timeout_s);
  if (output) *output = child.output();
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? -WTERMSIG(status) : -1000;
}

// Waits until `path` has at least `lines` lines (or the child exits).
inline bool wait_for_lines(Child& child, const fs::path& path, size_t lines,
                           double timeout_s = 30) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (count_lines(path) >= lines) return true;
    if (!child.running()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

}  // namespace lt::train::testing
