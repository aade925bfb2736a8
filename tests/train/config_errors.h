#pragma once
// The fixture of the config tests (config_test.cpp, config_yaml_test.cpp,
// config_paths_test.cpp): a valid config to vary, and the message its
// load throws.
#include <gtest/gtest.h>

#include "train_helpers.h"

namespace lt::train::testing {

class ConfigErrors : public ::testing::Test {
 protected:
  ConfigErrors() : tmp_("config") { write_random_tokens(tmp_ / "data.jsonl", 4, 97, 1); }
  // A valid config with `train_extra` lines added to the train section and
  // `tail` appended at the end.
  std::string yaml(const std::string& train_extra = "", const std::string& tail = "",
                   const std::string& model = "") const {
    return "model:\n  path: \"" + (model.empty() ? fixture("llama").string() : model) +
           "\"\ndata:\n  path: \"" + (tmp_ / "data.jsonl").string() +
           "\"\n  format: tokens\ntrain:\n  steps: 2\n" + train_extra + "out:\n  dir: \"" +
           (tmp_ / "out").string() + "\"\n" + tail;
  }
  // The message of the lt::Error that loading `text` (+ overrides) throws.
  std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
    const fs::path file = tmp_ / "run.yaml";
    write_text(file, text);
    try {
      load_train_config(file.string(), overrides);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error for:\n" << text;
    return "";
  }
  // TrainConfig::adjustments() of the valid config with `overrides`, a line
  // each ("" when none).
  std::string notes(const std::vector<std::string>& overrides) {
    write_text(tmp_ / "ok.yaml", yaml());
    std::string all;
    for (const std::string& n :
         load_train_config((tmp_ / "ok.yaml").string(), overrides).adjustments())
      all += n + "\n";
    return all;
  }
  TempDir tmp_;
};

}  // namespace lt::train::testing
