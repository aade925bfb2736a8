// The built-in layouts written as Jinja (data/builtin_template_jinja.h)
// against the built-in renderer: for each layout and conversation, the
// Jinja template gives the same ids and labels as ChatTemplate::render, and
// its generation prompt the same ids as PromptRenderer::chat, both through
// this project's Jinja renderer and as the text transformers would encode.
// The texts transformers' apply_chat_template (5.24, jinja2 3.1) renders
// from the same templates for one conversation are the goldens below.
#include "data/builtin_template_jinja.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat_template_fixtures.h"
#include "data/chat_template_jinja.h"
#include "data/prompt_rows.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;

// The Qwen3 tokenizer (which has ChatML's and the think tokens) with
// Llama-3's special tokens added and a post-processor that puts
// <|begin_of_text|> before a text, so plain has a prefix token to write.
class BuiltinTemplateJinja : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("lazytrain_builtin_jinja_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    std::ifstream in(testing::fixtures_dir() / "qwen3" / "tokenizer.json");
    nlohmann::json tokenizer = nlohmann::json::parse(in);
    uint32_t id = 151669;
    for (const char* token :
         {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}) {
      tokenizer["added_tokens"].push_back(testing::special_added_token(id++, token));
    }
    tokenizer["post_processor"] = nlohmann::json::parse(R"({
      "type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [], "special_tokens": {}})");
    std::ofstream(dir_ / "tokenizer.json") << tokenizer.dump();
    std::ofstream(dir_ / "tokenizer_config.json")
        << nlohmann::json{{"eos_token", "<|endoftext|>"}}.dump();
    tokenizer_ = new Tokenizer(Tokenizer::load(dir_));
    config_ = new TokenizerConfig(read_tokenizer_config(dir_));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete config_;
    fs::remove_all(dir_);
  }

  static std::string source(TemplateKind kind) {
    return builtin_template_jinja(kind, *tokenizer_, *config_);
  }
  static JinjaChatTemplate jinja(TemplateKind kind) {
    return JinjaChatTemplate(source(kind), "builtin", config_->bos_token, config_->eos_token);
  }
  // A folder as a checkpoint carries the layout: the tokenizer, and the
  // template in chat_template.jinja.
  static fs::path folder_with(TemplateKind kind) {
    const fs::path folder = dir_ / std::string(template_kind_name(kind));
    fs::create_directories(folder);
    fs::copy_file(dir_ / "tokenizer.json", folder / "tokenizer.json",
                  fs::copy_options::overwrite_existing);
    fs::copy_file(dir_ / "tokenizer_config.json", folder / "tokenizer_config.json",
                  fs::copy_options::overwrite_existing);
    std::ofstream(folder / "chat_template.jinja") << source(kind);
    return folder;
  }

  static fs::path dir_;
  static Tokenizer* tokenizer_;
  static TokenizerConfig* config_;
};
fs::path BuiltinTemplateJinja::dir_;
Tokenizer* BuiltinTemplateJinja::tokenizer_ = nullptr;
TokenizerConfig* BuiltinTemplateJinja::config_ = nullptr;

constexpr TemplateKind kBuiltins[] = {TemplateKind::kChatml, TemplateKind::kQwen3,
                                      TemplateKind::kLlama3, TemplateKind::kPlain};

const std::vector<std::vector<ChatMessage>> kConversations = {
    {{Role::kUser, "What is 2+2?"}, {Role::kAssistant, "4"}},
    {{Role::kSystem, "Be brief."},
     {Role::kUser, "Hi there  "},
     {Role::kAssistant, "Hello."},
     {Role::kUser, "And then?"},
     {Role::kAssistant, "Bye.\n"}},
    // Reasoning in the content: qwen3 splits it off (and keeps the block of
    // the last answer only), the others keep it as text.
    {{Role::kUser, "Q1"},
     {Role::kAssistant, "<think>\nold\n</think>\n\nA1"},
     {Role::kUser, "Q2"},
     {Role::kAssistant, "<think>\n\nwhy\n</think>\n\n\nA2"}},
    // A multi-turn answer after the last query: the first answer without
    // reasoning gets no think block, the last one an empty one.
    {{Role::kUser, "Q"}, {Role::kAssistant, "part one"}, {Role::kAssistant, "part two"}},
};

const std::vector<std::vector<ChatMessage>> kPrompts = {
    {{Role::kUser, "What is 2+2?"}},
    {{Role::kSystem, "Be brief."}, {Role::kUser, "Hi"}},
    {{Role::kUser, "Q1"}, {Role::kAssistant, "<think>\nr\n</think>\n\nA1"}, {Role::kUser, "Q2"}},
};

TEST_F(BuiltinTemplateJinja, ConversationsRenderAsTheBuiltInRendererRendersThem) {
  const SpecialIds special = resolve_special_ids(*tokenizer_, *config_);
  for (TemplateKind kind : kBuiltins) {
    const ChatTemplate builtin(kind, *tokenizer_, special);
    const JinjaChatTemplate as_jinja = jinja(kind);
    for (size_t i = 0; i < kConversations.size(); ++i) {
      const Sample want = builtin.render(kConversations[i], false);
      const Sample got = as_jinja.render(kConversations[i], *tokenizer_, false);
      EXPECT_EQ(got.ids, want.ids) << template_kind_name(kind) << " conversation " << i;
      // Which tokens the Jinja form trains (chat_template_jinja.h) is a
      // guess from the text; it finds the built-in's masks here.
      EXPECT_EQ(got.labels, want.labels) << template_kind_name(kind) << " conversation " << i;
      // transformers encodes the rendered text whole, without added
      // special tokens (apply_chat_template(tokenize=True)).
      const std::vector<uint32_t> whole =
          tokenizer_->encode(as_jinja.render_text(kConversations[i], false));
      EXPECT_EQ(std::vector<int32_t>(whole.begin(), whole.end()), want.ids)
          << template_kind_name(kind) << " conversation " << i;
    }
  }
}

TEST_F(BuiltinTemplateJinja, GenerationPromptsAreTheBuiltInRenderersPrompts) {
  for (TemplateKind kind : kBuiltins) {
    const std::string name(template_kind_name(kind));
    const PromptRenderer builtin(*tokenizer_, dir_, name);
    // As lazytrain's generate prompts a checkpoint carrying the template.
    const fs::path folder = folder_with(kind);
    const PromptRenderer from_folder(*tokenizer_, folder, "auto");
    ASSERT_EQ(from_folder.template_name(), "jinja");
    EXPECT_EQ(from_folder.turn_end(), builtin.turn_end()) << name;
    const JinjaChatTemplate as_jinja = jinja(kind);
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      const std::vector<int32_t> want = builtin.chat(kPrompts[i]);
      EXPECT_EQ(from_folder.chat(kPrompts[i]), want) << name << " prompt " << i;
      // As transformers renders it: apply_chat_template(...,
      // add_generation_prompt=True, enable_thinking=False).
      const std::vector<uint32_t> whole =
          tokenizer_->encode(as_jinja.render_text(kPrompts[i], true, true));
      EXPECT_EQ(std::vector<int32_t>(whole.begin(), whole.end()), want) << name << " prompt " << i;
    }
  }
  // Qwen3's default (enable_thinking left out) lets the model think: the
  // prompt stops at the assistant header, as Qwen3's own template does.
  const std::vector<ChatMessage> hi = {{Role::kUser, "Hi"}};
  EXPECT_EQ(jinja(TemplateKind::kQwen3).render_text(hi, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

// From transformers 5.24's apply_chat_template(conversation,
// chat_template=source, tokenize=False, add_generation_prompt=...,
// enable_thinking=False), source being builtin_template_jinja(kind, this
// tokenizer): the conversation is kConversations[1] with the reasoning
// answer of kConversations[2] appended, the prompt kPrompts[1].
struct Golden {
  TemplateKind kind;
  const char* conversation;
  const char* prompt;
};

const Golden kGoldens[] = {
    {TemplateKind::kChatml,
     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there  <|im_end|>\n"
     "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nAnd then?<|im_end|>\n"
     "<|im_start|>assistant\nBye.\n<|im_end|>\n"
     "<|im_start|>assistant\n<think>\n\nwhy\n</think>\n\n\nA2<|im_end|>\n",
     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {TemplateKind::kQwen3,
     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there  <|im_end|>\n"
     "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nAnd then?<|im_end|>\n"
     "<|im_start|>assistant\nBye.\n<|im_end|>\n"
     "<|im_start|>assistant\n<think>\nwhy\n</think>\n\nA2<|im_end|>\n",
     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
     "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
    {TemplateKind::kLlama3,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nAnd then?<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nBye.<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n<think>\n\nwhy\n</think>\n\n\nA2<|eot_id|>",
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {TemplateKind::kPlain,
     "<|begin_of_text|>Be brief.\nHi there  \nHello.<|endoftext|>"
     "And then?\nBye.\n<|endoftext|><think>\n\nwhy\n</think>\n\n\nA2<|endoftext|>",
     "<|begin_of_text|>Be brief.\nHi\n"},
};

TEST_F(BuiltinTemplateJinja, RenderAsTransformersRendersThem) {
  std::vector<ChatMessage> conversation = kConversations[1];
  conversation.push_back(kConversations[2].back());
  for (const Golden& golden : kGoldens) {
    const JinjaChatTemplate as_jinja = jinja(golden.kind);
    EXPECT_EQ(as_jinja.render_text(conversation, false), golden.conversation)
        << template_kind_name(golden.kind);
    EXPECT_EQ(as_jinja.render_text(kPrompts[1], true, true), golden.prompt)
        << template_kind_name(golden.kind);
  }
}

TEST(BuiltinTemplateJinjaSource, PlainWritesItsTokensAsJinjaStrings) {
  const std::string source = builtin_template_jinja(TemplateKind::kPlain, {"<s>"}, "it's\\");
  EXPECT_NE(source.find("'<s>'"), std::string::npos) << source;
  EXPECT_NE(source.find("'it\\'s\\\\'"), std::string::npos) << source;
  const JinjaChatTemplate parsed(source, "plain", std::nullopt, std::nullopt);
  const std::vector<ChatMessage> messages = {{Role::kUser, "a"}, {Role::kAssistant, "b"}};
  EXPECT_EQ(parsed.render_text(messages, false), "<s>a\nbit's\\");
}

}  // namespace
}  // namespace lt::data
