// template auto and the files a chat template comes from. transformers 5
// saves it in chat_template.jinja, which takes priority over
// tokenizer_config.json's "chat_template" when a tokenizer loads
// (PreTrainedTokenizerBase._from_pretrained: "independent chat template
// file(s) ... take priority over template entries in the tokenizer
// config"). auto renders whichever template that is (chat_template_jinja.h);
// one the renderer cannot handle is an error asking for a layout by name;
// only a tokenizer with no template at all (GPT-2's) gets plain.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "data/chat_template.h"
#include "data/chat_template_jinja.h"
#include "data/dataset.h"
#include "support/errors.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using lt::testing::error_of;

// A template outside the renderer's subset: includes are not supported.
constexpr const char* kIncludeTemplate =
    "{% for message in messages %}{% include 'turn.jinja' %}{% endfor %}";
// Llama 3's, abridged to the header tokens auto looks for.
constexpr const char* kLlama3Template =
    "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}";

class ChatTemplateAuto : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lt_template_auto_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    // Qwen3's tokenizer.json without its tokenizer_config.json: the
    // template comes from what each test writes beside it.
    fs::copy_file(testing::fixtures_dir() / "qwen3" / "tokenizer.json", dir_ / "tokenizer.json");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST_F(ChatTemplateAuto, TheJinjaFileAloneGivesTheTemplate) {
  std::ifstream in(testing::fixtures_dir() / "qwen3" / "tokenizer_config.json");
  const nlohmann::json qwen3 = nlohmann::json::parse(in);
  write("chat_template.jinja", qwen3.at("chat_template").get<std::string>());
  const TokenizerConfig config = read_tokenizer_config(dir_);
  EXPECT_EQ(config.chat_template_file, dir_ / "chat_template.jinja");
  const TemplateChoice choice = resolve_template_kind("auto", config);
  ASSERT_EQ(choice, TemplateKind::kJinja);
  EXPECT_EQ(choice.jinja->file(), dir_ / "chat_template.jinja");
}

TEST_F(ChatTemplateAuto, TheJinjaFileWinsOverTheConfigAsInTransformers) {
  write("tokenizer_config.json",
        nlohmann::json{{"chat_template", "{{ '<|im_start|>' }}"}, {"eos_token", "<|im_end|>"}}
            .dump());
  write("chat_template.jinja", kLlama3Template);
  const TokenizerConfig config = read_tokenizer_config(dir_ / "tokenizer.json");
  EXPECT_EQ(config.chat_template, kLlama3Template);
  const TemplateChoice choice = resolve_template_kind("auto", config);
  ASSERT_EQ(choice, TemplateKind::kJinja);
  EXPECT_EQ(choice.jinja->file(), dir_ / "chat_template.jinja");
  EXPECT_EQ(config.eos_token, "<|im_end|>");  // the rest of the config still counts
}

// transformers passes the template its special_tokens_map by name: these
// values and this text are what apply_chat_template gave (transformers
// 5.25, this folder's files) for the user message "hi". A token set to null
// is not passed, so it renders as undefined.
TEST_F(ChatTemplateAuto, TheTemplateSeesTheNamedSpecialTokensAsInTransformers) {
  write("tokenizer_config.json",
        nlohmann::json{{"eos_token", "<|im_end|>"},
                       {"unk_token", "<unk>"},
                       {"pad_token", "<|endoftext|>"},
                       {"sep_token", nullptr},
                       {"chat_template",
                        "{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}[{{ "
                        "pad_token }}|{{ unk_token }}|{{ sep_token }}|{{ cls_token is defined "
                        "}}|{{ mask_token }}|{{ bos_token }}]"}}
            .dump());
  const TemplateChoice choice = resolve_template_kind("auto", read_tokenizer_config(dir_));
  ASSERT_EQ(choice, TemplateKind::kJinja);
  const ChatMessage hi{Role::kUser, "hi"};
  EXPECT_EQ(choice.jinja->render_text(std::span(&hi, 1), false),
            "hi<|im_end|>[<|endoftext|>|<unk>||False||]");
}

// A config saved without added_tokens_decoder (older transformers) takes
// its named tokens from special_tokens_map.json where that file has them;
// with added_tokens_decoder the map is not read. The texts are
// apply_chat_template's (transformers 5.25, these files, "hi").
TEST_F(ChatTemplateAuto, AnOlderSaveTakesItsTokensFromTheSpecialTokensMap) {
  nlohmann::json config{{"eos_token", "<|im_end|>"},
                        {"unk_token", "<unk>"},
                        {"tokenizer_class", "Qwen2Tokenizer"},
                        {"chat_template",
                         "{{ messages[0].content }}[{{ eos_token }}|{{ pad_token }}|{{ unk_token "
                         "}}|{{ bos_token }}]"}};
  write("tokenizer_config.json", config.dump());
  write("special_tokens_map.json",
        nlohmann::json{{"eos_token", {{"content", "<|endoftext|>"}, {"lstrip", false}}},
                       {"pad_token", "<|im_start|>"}}
            .dump());
  const ChatMessage hi{Role::kUser, "hi"};
  const TokenizerConfig legacy = read_tokenizer_config(dir_);
  EXPECT_EQ(legacy.eos_token, "<|endoftext|>");
  EXPECT_EQ(resolve_template_kind("auto", legacy).jinja->render_text(std::span(&hi, 1), false),
            "hi[<|endoftext|>|<|im_start|>|<unk>|]");
  config["added_tokens_decoder"] = nlohmann::json::object();
  config["chat_template"] = "{{ messages[0].content }}[{{ eos_token }}|{{ unk_token }}]";
  write("tokenizer_config.json", config.dump());
  const TokenizerConfig current = read_tokenizer_config(dir_);
  EXPECT_EQ(current.eos_token, "<|im_end|>");
  EXPECT_EQ(resolve_template_kind("auto", current).jinja->render_text(std::span(&hi, 1), false),
            "hi[<|im_end|>|<unk>]");
}

TEST_F(ChatTemplateAuto, AnUnrenderableTemplateIsAnErrorNamingItsFile) {
  write("chat_template.jinja", kIncludeTemplate);
  const std::string message =
      error_of([&] { resolve_template_kind("auto", read_tokenizer_config(dir_)); });
  EXPECT_NE(message.find((dir_ / "chat_template.jinja").string()), std::string::npos) << message;
  EXPECT_NE(message.find("--template"), std::string::npos) << message;
  EXPECT_NE(message.find("data.template"), std::string::npos) << message;
  // A template named by the user is used as it is.
  EXPECT_EQ(resolve_template_kind("plain", read_tokenizer_config(dir_)), TemplateKind::kPlain);

  // The same from tokenizer_config.json names that file.
  fs::remove(dir_ / "chat_template.jinja");
  write("tokenizer_config.json", nlohmann::json{{"chat_template", kIncludeTemplate}}.dump());
  const std::string config_message =
      error_of([&] { resolve_template_kind("auto", read_tokenizer_config(dir_)); });
  EXPECT_NE(config_message.find((dir_ / "tokenizer_config.json").string()), std::string::npos)
      << config_message;

  // Loading a chat dataset with template auto stops there, before any row
  // is rendered in a layout the model was not tuned on.
  const Tokenizer tokenizer = Tokenizer::load(dir_);
  DatasetOptions options;
  options.tokenizer_path = dir_;
  const std::string load_message = error_of([&] {
    load_dataset(testing::fixtures_dir() / "datasets" / "alpaca.jsonl", &tokenizer, options,
                 nullptr);
  });
  EXPECT_NE(load_message.find("tokenizer_config.json"), std::string::npos) << load_message;
  EXPECT_NE(load_message.find("--template"), std::string::npos) << load_message;
}

// GPT-2's folder has no template at all: plain, as before, and a dataset
// in a chat format loads with it.
TEST_F(ChatTemplateAuto, NoTemplateAtAllIsPlain) {
  EXPECT_EQ(resolve_template_kind("auto", read_tokenizer_config(dir_)), TemplateKind::kPlain);
  const fs::path gpt2 = testing::fixtures_dir() / "gpt2";
  EXPECT_EQ(resolve_template_kind("auto", read_tokenizer_config(gpt2)), TemplateKind::kPlain);
  DatasetOptions options;
  options.tokenizer_path = gpt2;
  DatasetReport report;
  load_dataset(testing::fixtures_dir() / "datasets" / "alpaca.jsonl",
               &testing::reference_tokenizer("gpt2"), options, &report);
  EXPECT_EQ(report.template_name, "plain");
}

}  // namespace
}  // namespace lt::data
