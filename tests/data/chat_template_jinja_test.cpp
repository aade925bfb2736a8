// Models' own chat templates, rendered here, against transformers'
// apply_chat_template (fixtures/chat_template_jinja_goldens.json, made by
// tools/reference/make_chat_template_goldens.py): for Qwen2.5, Qwen3,
// Llama 3.1, Llama 2, Mistral v0.3, Gemma 2, Phi-3 and DeepSeek-R1-Distill
// templates, the text character for character (with and without the
// generation prompt), the ids token for token and the labels; conversations
// a template refuses (raise_exception) are refused here too. The tokenizer
// is Qwen3's with the templates' special tokens added, as in the script.
#include "data/chat_template_jinja.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "chat_template_fixtures.h"
#include "core/error.h"
#include "data/chat_template.h"
#include "data/dataset.h"
#include "data/prompt_rows.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using testing::fixtures_dir;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json load_goldens() {
  std::ifstream in(fixtures_dir() / "chat_template_jinja_goldens.json");
  return nlohmann::json::parse(in);
}

std::vector<ChatMessage> to_messages(const nlohmann::json& list) {
  std::vector<ChatMessage> messages;
  for (const auto& m : list) {
    const std::string role = m.at("role");
    const Role r = role == "system" ? Role::kSystem
                   : role == "user" ? Role::kUser
                                    : Role::kAssistant;
    messages.push_back({r, m.at("content").get<std::string>()});
  }
  return messages;
}

// Qwen3's tokenizer with the goldens' added special tokens, written once.
class JinjaTemplates : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    goldens_ = new nlohmann::json(load_goldens());
    dir_ = fs::temp_directory_path() / ("lazytrain_jinja_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    testing::write_qwen3_with_added_specials(dir_, goldens_->at("added_special_tokens"));
    tokenizer_ = new Tokenizer(Tokenizer::load(dir_));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete goldens_;
    fs::remove_all(dir_);
  }

  // The template a golden case names, with its bos/eos as in its config.
  static JinjaChatTemplate template_of(const std::string& relative) {
    const fs::path file = fixtures_dir() / relative;
    std::string source = read_file(file);
    std::optional<std::string> bos, eos;
    if (file.extension() == ".json") {
      const nlohmann::json config = nlohmann::json::parse(source);
      source = config.at("chat_template");
    }
    static const std::map<std::string, std::pair<const char*, const char*>> kSpecial = {
        {"qwen3/tokenizer_config.json", {nullptr, "<|im_end|>"}},
        {"chat_templates/qwen2.5.jinja", {nullptr, "<|im_end|>"}},
        {"chat_templates/llama3.1.jinja", {"<|begin_of_text|>", "<|eot_id|>"}},
        {"chat_templates/llama2.jinja", {"<s>", "</s>"}},
        {"chat_templates/mistral-v0.3.jinja", {"<s>", "</s>"}},
        {"chat_templates/gemma2.jinja", {"<bos>", "<eos>"}},
        {"chat_templates/phi3.jinja", {"<s>", "<|endoftext|>"}},
        {"chat_templates/deepseek-r1-distill.jinja",
         {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"}},
    };
    const auto& [b, e] = kSpecial.at(relative);
    if (b) bos = b;
    if (e) eos = e;
    return JinjaChatTemplate(source, file, bos, eos);
  }

  static nlohmann::json* goldens_;
  static fs::path dir_;
  static Tokenizer* tokenizer_;
};
nlohmann::json* JinjaTemplates::goldens_ = nullptr;
fs::path JinjaTemplates::dir_;
Tokenizer* JinjaTemplates::tokenizer_ = nullptr;

TEST_F(JinjaTemplates, RealTemplatesMatchTransformers) {
  for (const auto& [token, id] : goldens_->at("added_special_tokens").items()) {
    ASSERT_EQ(tokenizer_->token_to_id(token), id.get<uint32_t>()) << token;
  }
  int rendered = 0, refused = 0;
  std::set<std::string> templates;
  for (const auto& c : goldens_->at("cases")) {
    const std::string where =
        c.at("template").get<std::string>() + " / " + c.at("conversation").get<std::string>();
    templates.insert(c.at("template"));
    const JinjaChatTemplate t = template_of(c.at("template"));
    const std::vector<ChatMessage> messages = to_messages(c.at("messages"));
    if (c.contains("error")) {
      try {
        t.render(messages, *tokenizer_, false);
        ADD_FAILURE() << where << ": transformers raised " << c.at("error");
      } catch (const Error& e) {
        // The message names the template's file and repeats the template's own.
        EXPECT_NE(std::string(e.what()).find(t.file().string() + ":"), std::string::npos)
            << e.what();
      }
      ++refused;
      continue;
    }
    EXPECT_EQ(t.render_text(messages, false), c.at("text").get<std::string>()) << where;
    EXPECT_EQ(t.render_text(messages, true), c.at("generation_prompt_text").get<std::string>())
        << where;
    const Sample sample = t.render(messages, *tokenizer_, false);
    EXPECT_EQ(sample.ids, c.at("ids").get<std::vector<int32_t>>()) << where;
    EXPECT_EQ(sample.labels, c.at("labels").get<std::vector<int32_t>>()) << where;
    const Sample all = t.render(messages, *tokenizer_, true);
    EXPECT_EQ(all.labels, all.ids) << where;
    ++rendered;
  }
  EXPECT_EQ(templates.size(), 8u);
  EXPECT_GE(rendered, 40);
  EXPECT_GE(refused, 3);  // Llama 2, Mistral, Gemma refuse an assistant-first conversation
}

TEST(JinjaChatTemplate, Qwen3AutoMatchesTheQwen3Goldens) {
  // Qwen3's tokenizer_config.json through "auto": the ids and labels that
  // chat_template_goldens.json holds (labels made there by a different
  // rule, from transformers' generation prompts).
  const Tokenizer& qwen = testing::reference_tokenizer("qwen3");
  const TokenizerConfig config = read_tokenizer_config(fixtures_dir() / "qwen3");
  const TemplateChoice choice = resolve_template_kind("auto", config);
  ASSERT_EQ(choice.kind, TemplateKind::kJinja);
  const ChatTemplate qwen3(choice, qwen, resolve_special_ids(qwen, config));
  EXPECT_EQ(qwen3.name(), "jinja");
  EXPECT_EQ(qwen3.turn_end(), qwen.token_to_id("<|im_end|>"));
  std::ifstream in(fixtures_dir() / "chat_template_goldens.json");
  const nlohmann::json goldens = nlohmann::json::parse(in);
  for (const auto& c : goldens.at("cases")) {
    const Sample sample = qwen3.render(to_messages(c.at("messages")), false);
    EXPECT_EQ(sample.ids, c.at("ids").get<std::vector<int32_t>>()) << c.at("name");
    EXPECT_EQ(sample.labels, c.at("labels").get<std::vector<int32_t>>()) << c.at("name");
  }
}

class TemplateFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lazytrain_jinja_folder_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TemplateFolder, UnrenderableTemplateNamesTheFileAndSuggestsTemplate) {
  std::ofstream(dir_ / "chat_template.jinja") << "{% include 'turn.jinja' %}";
  const TokenizerConfig config = read_tokenizer_config(dir_);
  try {
    resolve_template_kind("auto", config);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find((dir_ / "chat_template.jinja").string() + ":1: unsupported tag"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("--template"), std::string::npos) << what;
    EXPECT_NE(what.find("data.template"), std::string::npos) << what;
  }
}

// A template held in tokenizer_config.json is one JSON string: its line 3
// is not the file's line 3, which the message read as (a user looked at
// `"single_word": false,`).
TEST_F(TemplateFolder, ALineOfATemplateInJsonIsSaidToBeTheTemplates) {
  std::ofstream(dir_ / "tokenizer_config.json")
      << nlohmann::json({{"chat_template", "{{ a }}\n{{ b }}\n{% endfo %}"}}).dump(2);
  const TokenizerConfig config = read_tokenizer_config(dir_);
  try {
    resolve_template_kind("auto", config);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "tokenizer_config.json").string() +
                                         ": the chat template's line 3 (of its text, not of the "
                                         "file): unsupported tag {% endfo %}"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(TemplateFolder, ListOfNamedTemplatesUsesDefault) {
  nlohmann::json config = {{"chat_template",
                            {{{"name", "tool_use"}, {"template", "T{{ messages|length }}"}},
                             {{"name", "default"}, {"template", "D{{ messages|length }}"}}}}};
  std::ofstream(dir_ / "tokenizer_config.json") << config.dump();
  const TemplateChoice choice = resolve_template_kind("auto", read_tokenizer_config(dir_));
  ASSERT_EQ(choice.kind, TemplateKind::kJinja);
  const std::vector<ChatMessage> messages{{Role::kUser, "x"}};
  EXPECT_EQ(choice.jinja->render_text(messages, false), "D1");
}

// A list without a "default" template is refused when the chat layout is
// "auto", naming the file and the templates (transformers' apply_chat_template
// raises "multiple chat templates with no default specified"); the first was
// taken before, rendering every prompt as a "tool_use" template. A named
// layout, or a chat_template.jinja beside it, still works.
TEST_F(TemplateFolder, ListOfNamedTemplatesWithoutDefaultIsRefused) {
  nlohmann::json config = {
      {"chat_template",
       {{{"name", "tool_use"}, {"template", "x"}}, {{"name", "rag"}, {"template", "y"}}}}};
  std::ofstream(dir_ / "tokenizer_config.json") << config.dump();
  const TokenizerConfig read = read_tokenizer_config(dir_);
  EXPECT_TRUE(read.chat_template.empty());
  try {
    resolve_template_kind("auto", read);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find((dir_ / "tokenizer_config.json").string() +
                        ": field \"chat_template\": a list of templates named tool_use, rag and "
                        "none named \"default\""),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("data.template"), std::string::npos) << what;
  }
  EXPECT_EQ(resolve_template_kind("chatml", read), TemplateKind::kChatml);
  std::ofstream(dir_ / "chat_template.jinja") << "J{{ messages|length }}";
  const TemplateChoice choice = resolve_template_kind("auto", read_tokenizer_config(dir_));
  ASSERT_EQ(choice.kind, TemplateKind::kJinja);
  const std::vector<ChatMessage> messages{{Role::kUser, "x"}};
  EXPECT_EQ(choice.jinja->render_text(messages, false), "J1");
  // Text prompts take no chat layout, so such a list does not refuse them.
  fs::remove(dir_ / "chat_template.jinja");
  std::ofstream(dir_ / "prompts.txt") << "first prompt\n\nsecond prompt\n";
  PromptOptions options;
  options.tokenizer_path = dir_;
  EXPECT_EQ(load_prompts(dir_ / "prompts.txt", &testing::reference_tokenizer("gpt2"), options)
                .rows.size(),
            2u);
}

// A reply that is a control character itself (U+0001 was the stand-in
// that finds where a reply lands) trains as any reply: its tokens and the
// end of its turn. It rendered as its stand-in did, and trained nothing.
TEST_F(JinjaTemplates, AReplyOfTheStandInCharacterIsTrained) {
  for (const auto& [file, end] :
       {std::pair<const char*, const char*>{"qwen3/tokenizer_config.json", "<|im_end|>"},
        {"chat_templates/llama3.1.jinja", "<|eot_id|>"}}) {
    const JinjaChatTemplate t = template_of(file);
    const std::vector<ChatMessage> messages = {{Role::kUser, "x"},
                                               {Role::kAssistant, "\x01"},
                                               {Role::kUser, "y"},
                                               {Role::kAssistant, "ok"}};
    const Sample sample = t.render(messages, *tokenizer_, false);
    std::vector<uint32_t> trained;
    for (size_t i = 0; i < sample.ids.size(); ++i)
      if (sample.labels[i] != -100) trained.push_back(static_cast<uint32_t>(sample.labels[i]));
    EXPECT_EQ(tokenizer_->decode(trained), "\x01" + std::string(end) + "ok" + end) << file;
  }
}

TEST_F(JinjaTemplates, PromptsEndWhereTheAnswerStarts) {
  // Generation renders a prompt as training does: the text before the
  // answer's first trained token, which here is each template's own
  // generation prompt; it stops at the turn's special token.
  struct Case {
    const char* file;
    const char* bos;
    const char* eos;
    const char* prompt_end;  // the text the prompt ends with
    const char* turn_end;
  };
  const Case cases[] = {
      {"chat_templates/llama3.1.jinja", "<|begin_of_text|>", "<|eot_id|>",
       "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
      {"chat_templates/gemma2.jinja", "<bos>", "<eos>", "<start_of_turn>model\n", "<end_of_turn>"},
      {"chat_templates/llama2.jinja", "<s>", "</s>", " [/INST]", "</s>"},
      {"chat_templates/phi3.jinja", "<s>", "<|endoftext|>", "<|assistant|>\n", "<|end|>"},
  };
  for (const Case& c : cases) {
    const fs::path folder = dir_ / fs::path(c.file).stem();
    fs::create_directories(folder);
    fs::copy_file(fixtures_dir() / c.file, folder / "chat_template.jinja");
    std::ofstream(folder / "tokenizer_config.json")
        << nlohmann::json{{"bos_token", c.bos}, {"eos_token", c.eos}}.dump();
    // No tokenizer.json here: the renderer is given the tokenizer, and
    // these templates write their BOS themselves.
    const PromptRenderer renderer(*tokenizer_, folder, "auto");
    EXPECT_EQ(renderer.template_name(), "jinja");
    EXPECT_EQ(renderer.turn_end(), static_cast<int32_t>(*tokenizer_->token_to_id(c.turn_end)))
        << c.file;
    const std::vector<int32_t> prompt = renderer.chat({{Role::kUser, "Hi"}});
    const std::vector<uint32_t> ids(prompt.begin(), prompt.end());
    EXPECT_TRUE(tokenizer_->decode(ids).ends_with(c.prompt_end))
        << c.file << ": " << tokenizer_->decode(ids);
  }
}

TEST_F(JinjaTemplates, ADatasetRowTheTemplateRefusesIsABadRowNamed) {
  // Gemma 2's template raises for a system message: that row is skipped and
  // named with the template's words, as other bad rows are (data.strict
  // refuses the load there). It stopped the whole load naming neither the
  // file nor the row, and suggested another layout for a data error.
  const fs::path folder = dir_ / "gemma2_dataset";
  fs::create_directories(folder);
  fs::copy_file(fixtures_dir() / "chat_templates" / "gemma2.jinja", folder / "chat_template.jinja");
  std::ofstream(folder / "tokenizer_config.json")
      << nlohmann::json{{"bos_token", "<bos>"}, {"eos_token", "<eos>"}}.dump();
  std::ofstream(folder / "rows.jsonl")
      << R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]})"
      << "\n"
      << R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]})"
      << "\n";
  DatasetOptions options;
  options.tokenizer_path = folder;
  const std::string named =
      (folder / "rows.jsonl").string() +
      ":2: the chat template refuses the row: " + (folder / "chat_template.jinja").string() +
      ":1: the template raised an error: System role not supported";
  DatasetReport report;
  const std::vector<Sample> samples =
      load_dataset(folder / "rows.jsonl", tokenizer_, options, &report);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].line, 1);
  EXPECT_EQ(report.skipped, 1);
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0], named);
  options.strict = true;
  try {
    load_dataset(folder / "rows.jsonl", tokenizer_, options, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), named);
  }
  // The prompts of eval --task math and generate --data: skipped, named.
  PromptOptions prompt_options;
  prompt_options.tokenizer_path = folder;
  const PromptSet prompts = load_prompts(folder / "rows.jsonl", tokenizer_, prompt_options);
  EXPECT_EQ(prompts.rows.size(), 1u);
  EXPECT_EQ(prompts.skipped, 1);
  ASSERT_EQ(prompts.problems.size(), 1u);
  EXPECT_EQ(prompts.problems[0], named);
}

}  // namespace
}  // namespace lt::data
