// Chat templates against hand-built expected ids and labels: the special
// tokens by their known ids, the text pieces encoded one by one (the
// tokenizer itself is checked against Hugging Face elsewhere; what is
// checked here is the assembly and the masks). The qwen3 template is also
// checked against transformers' apply_chat_template with Qwen3's own
// chat_template (fixtures/chat_template_goldens.json, made by
// tools/reference/make_chat_template_goldens.py).
#include "data/chat_template.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "chat_template_fixtures.h"
#include "core/error.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using testing::fixtures_dir;
using testing::reference_tokenizer;

// Qwen3's special tokens (tokenizer.json "added_tokens").
constexpr uint32_t kEndOfText = 151643, kImStart = 151644, kImEnd = 151645, kThink = 151667,
                   kThinkEnd = 151668;
// GPT-2's <|endoftext|>.
constexpr uint32_t kGpt2Eos = 50256;
// The Llama-3 special tokens added to the Qwen3 vocabulary by
// Llama3LikeTokenizer below.
constexpr uint32_t kBeginOfText = 151669, kStartHeader = 151670, kEndHeader = 151671,
                   kEotId = 151672;

// The expected sample, built piece by piece.
struct Expected {
  explicit Expected(const Tokenizer& t, bool all_trained = false)
      : tokenizer(t), train_on_prompt(all_trained) {}
  const Tokenizer& tokenizer;
  bool train_on_prompt;
  Sample sample;

  Expected& add(uint32_t id, bool trained) {
    sample.ids.push_back(static_cast<int32_t>(id));
    sample.labels.push_back(trained || train_on_prompt ? static_cast<int32_t>(id) : kIgnoreLabel);
    return *this;
  }
  Expected& masked(uint32_t id) { return add(id, false); }
  Expected& trained(uint32_t id) { return add(id, true); }
  Expected& masked(const std::string& text) {
    for (uint32_t id : tokenizer.encode(text)) add(id, false);
    return *this;
  }
  Expected& trained(const std::string& text) {
    for (uint32_t id : tokenizer.encode(text)) add(id, true);
    return *this;
  }
};

void expect_sample(const Sample& actual, const Sample& expected) {
  EXPECT_EQ(actual.ids, expected.ids);
  EXPECT_EQ(actual.labels, expected.labels);
}

ChatTemplate chatml() {
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  return ChatTemplate(TemplateKind::kChatml, qwen, resolve_special_ids(qwen, {}));
}

TEST(ChatTemplate, QwenIdsOfTheTemplateWords) {
  // The words the chatml expectations below encode, checked once by id
  // (Qwen2/3 vocabulary).
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  EXPECT_EQ(qwen.encode("\n"), std::vector<uint32_t>{198});
  EXPECT_EQ(qwen.encode("user"), std::vector<uint32_t>{872});
  EXPECT_EQ(qwen.encode("assistant"), std::vector<uint32_t>{77091});
  EXPECT_EQ(qwen.encode("system"), std::vector<uint32_t>{8948});
  EXPECT_EQ(qwen.token_to_id("<|im_start|>"), kImStart);
  EXPECT_EQ(qwen.token_to_id("<|im_end|>"), kImEnd);
  EXPECT_EQ(qwen.token_to_id("<|endoftext|>"), kEndOfText);
}

TEST(ChatTemplate, ChatmlSingleTurnMasksThePrompt) {
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  std::vector<ChatMessage> messages = {{Role::kUser, "What is 2+2?"},
                                       {Role::kAssistant, "It is 4."}};
  Sample sample = chatml().render(messages, false);
  // <|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\nIt is 4.<|im_end|>\n
  Expected e{qwen};
  e.masked(kImStart).masked(872).masked(198).masked("What is 2+2?").masked(kImEnd).masked(198);
  e.masked(kImStart).masked(77091).masked(198).trained("It is 4.").trained(kImEnd).masked(198);
  expect_sample(sample, e.sample);
  EXPECT_EQ(qwen.decode(std::vector<uint32_t>(sample.ids.begin(), sample.ids.end())),
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\nIt is "
            "4.<|im_end|>\n");
}

TEST(ChatTemplate, ChatmlTrainOnPromptKeepsTheIds) {
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  std::vector<ChatMessage> messages = {{Role::kUser, "Hi"}, {Role::kAssistant, "Hello"}};
  Sample masked = chatml().render(messages, false);
  Sample all = chatml().render(messages, true);
  EXPECT_EQ(all.ids, masked.ids);
  EXPECT_EQ(all.labels, all.ids);
  Expected e{qwen, true};
  e.masked(kImStart).masked("user\nHi").masked(kImEnd).masked("\n");
  e.masked(kImStart).masked("assistant\n").trained("Hello").trained(kImEnd).masked("\n");
  expect_sample(all, e.sample);
}

TEST(ChatTemplate, ChatmlMultiTurnTrainsEveryAssistantTurn) {
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  std::vector<ChatMessage> messages = {{Role::kSystem, "Be brief."},
                                       {Role::kUser, "Hi"},
                                       {Role::kAssistant, "Hello!"},
                                       {Role::kUser, "And 1+1?"},
                                       {Role::kAssistant, "2"}};
  Sample sample = chatml().render(messages, false);
  Expected e{qwen};
  e.masked(kImStart).masked(8948).masked(198).masked("Be brief.").masked(kImEnd).masked(198);
  e.masked(kImStart).masked(872).masked(198).masked("Hi").masked(kImEnd).masked(198);
  e.masked(kImStart).masked(77091).masked(198).trained("Hello!").trained(kImEnd).masked(198);
  e.masked(kImStart).masked(872).masked(198).masked("And 1+1?").masked(kImEnd).masked(198);
  e.masked(kImStart).masked(77091).masked(198).trained("2").trained(kImEnd).masked(198);
  expect_sample(sample, e.sample);
  // Trained: "Hello!" + <|im_end|> and "2" + <|im_end|>.
  int trained = 0;
  for (int32_t label : sample.labels) trained += label != kIgnoreLabel;
  EXPECT_EQ(trained,
            static_cast<int>(qwen.encode("Hello!").size() + 1 + qwen.encode("2").size() + 1));
}

TEST(ChatTemplate, LabelBoundaryIsExactWhenContentStartsWithANewline) {
  // Encoded as one string, "assistant\n\nHi" would merge the two newlines
  // into one token (271, "\n\n"); the template keeps the boundary instead:
  // "\n" (198) masked, then "\nHi" trained.
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  EXPECT_EQ(qwen.encode("\n\n"), std::vector<uint32_t>{271});
  std::vector<ChatMessage> messages = {{Role::kUser, "x"}, {Role::kAssistant, "\nHi"}};
  Sample sample = chatml().render(messages, false);
  Expected e{qwen};
  e.masked(kImStart).masked("user\nx").masked(kImEnd).masked("\n");
  e.masked(kImStart).masked("assistant\n").trained("\nHi").trained(kImEnd).masked("\n");
  expect_sample(sample, e.sample);
}

TEST(ChatTemplate, SpecialTokensWrittenInContentAreSpecialIds) {
  // As Hugging Face encodes the rendered template (split_special_tokens=False).
  std::vector<ChatMessage> messages = {{Role::kUser, "a<|endoftext|>b"}, {Role::kAssistant, "c"}};
  Sample sample = chatml().render(messages, false);
  EXPECT_NE(std::find(sample.ids.begin(), sample.ids.end(), static_cast<int32_t>(kEndOfText)),
            sample.ids.end());
}

ChatTemplate qwen3() {
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  return ChatTemplate(TemplateKind::kQwen3, qwen, resolve_special_ids(qwen, {}));
}

TEST(ChatTemplate, Qwen3MasksTheEmptyThinkBlock) {
  // <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello<|im_end|>\n
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  EXPECT_EQ(qwen.token_to_id("<think>"), kThink);
  EXPECT_EQ(qwen.token_to_id("</think>"), kThinkEnd);
  std::vector<ChatMessage> messages = {{Role::kUser, "Hi"}, {Role::kAssistant, "Hello"}};
  Expected e{qwen};
  e.masked(kImStart).masked("user\nHi").masked(kImEnd).masked("\n");
  e.masked(kImStart).masked("assistant\n").masked(kThink).masked(271).masked(kThinkEnd).masked(271);
  e.trained("Hello").trained(kImEnd).masked("\n");
  expect_sample(qwen3().render(messages, false), e.sample);
}

TEST(ChatTemplate, Qwen3TrainsReasoningFromTheContent) {
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  std::vector<ChatMessage> messages = {{Role::kUser, "Q"},
                                       {Role::kAssistant, "<think>\n\nwhy\n</think>\n\n\nA"}};
  Expected e{qwen};
  e.masked(kImStart).masked("user\nQ").masked(kImEnd).masked("\n");
  e.masked(kImStart).masked("assistant\n");
  e.trained(kThink).trained("\nwhy\n").trained(kThinkEnd).trained("\n\nA").trained(kImEnd);
  e.masked("\n");
  expect_sample(qwen3().render(messages, false), e.sample);
}

Role role_named(const std::string& name) {
  if (name == "system") return Role::kSystem;
  if (name == "user") return Role::kUser;
  if (name == "assistant") return Role::kAssistant;
  throw std::runtime_error("chat_template_goldens.json: unknown role " + name);
}

std::vector<int32_t> int_list(const nlohmann::json& list) {
  return list.get<std::vector<int32_t>>();
}

TEST(ChatTemplate, Qwen3MatchesTransformers) {
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  std::ifstream in(fixtures_dir() / "chat_template_goldens.json");
  ASSERT_TRUE(in) << "missing " << (fixtures_dir() / "chat_template_goldens.json");
  const nlohmann::json goldens = nlohmann::json::parse(in);
  // The built-in qwen3 layout (auto renders Qwen3's own template instead:
  // chat_template_jinja_test.cpp checks it against the same goldens).
  const TokenizerConfig config = read_tokenizer_config(fixtures_dir() / "qwen3");
  const ChatTemplate from_config(TemplateKind::kQwen3, qwen, resolve_special_ids(qwen, config));
  ASSERT_GE(goldens["cases"].size(), 10u);
  int think_blocks = 0, masked_think_blocks = 0;
  for (const nlohmann::json& c : goldens["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    std::vector<ChatMessage> messages;
    for (const nlohmann::json& m : c["messages"]) {
      messages.push_back({role_named(m["role"]), m["content"].get<std::string>()});
    }
    const Sample sample = from_config.render(messages, false);
    EXPECT_EQ(sample.ids, int_list(c["ids"]));
    EXPECT_EQ(sample.labels, int_list(c["labels"]));
    EXPECT_EQ(qwen.decode(std::vector<uint32_t>(sample.ids.begin(), sample.ids.end())),
              c["text"].get<std::string>());
    const Sample all = from_config.render(messages, true);
    EXPECT_EQ(all.ids, sample.ids);
    EXPECT_EQ(all.labels, all.ids);
    for (size_t i = 0; i < sample.ids.size(); ++i) {
      if (sample.ids[i] != static_cast<int32_t>(kThink)) continue;
      ++think_blocks;
      masked_think_blocks += sample.labels[i] == kIgnoreLabel;
    }
  }
  // The goldens exercise both kinds of think block.
  EXPECT_GT(masked_think_blocks, 0);
  EXPECT_GT(think_blocks, masked_think_blocks);
}

TEST(ChatTemplate, PlainIsPromptNewlineResponseEos) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  SpecialIds special = resolve_special_ids(gpt2, read_tokenizer_config(fixtures_dir() / "gpt2"));
  ASSERT_EQ(special.eos, kGpt2Eos);
  EXPECT_TRUE(special.prefix.empty());
  ChatTemplate plain(TemplateKind::kPlain, gpt2, special);
  std::vector<ChatMessage> messages = {{Role::kUser, "What is 2+2?"}, {Role::kAssistant, "4"}};
  Sample sample = plain.render(messages, false);
  // GPT-2: "What"=2061 " is"=318 " 2"=362 "+"=10 "2"=17 "?"=30 "\n"=198 "4"=19.
  EXPECT_EQ(sample.ids, (std::vector<int32_t>{2061, 318, 362, 10, 17, 30, 198, 19, 50256}));
  EXPECT_EQ(sample.labels,
            (std::vector<int32_t>{-100, -100, -100, -100, -100, -100, -100, 19, 50256}));
  Expected e{gpt2};
  e.masked("What is 2+2?").masked("\n").trained("4").trained(kGpt2Eos);
  expect_sample(sample, e.sample);
  expect_sample(plain.render(messages, true), Expected(gpt2, true)
                                                  .masked("What is 2+2?")
                                                  .masked("\n")
                                                  .trained("4")
                                                  .trained(kGpt2Eos)
                                                  .sample);
}

TEST(ChatTemplate, PlainMultiTurnWithSystem) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  ChatTemplate plain(TemplateKind::kPlain, gpt2, resolve_special_ids(gpt2, {}));
  std::vector<ChatMessage> messages = {{Role::kSystem, "Be kind."},
                                       {Role::kUser, "Hi"},
                                       {Role::kAssistant, "Hello"},
                                       {Role::kUser, "Bye"},
                                       {Role::kAssistant, "Goodbye"}};
  Expected e{gpt2};
  e.masked("Be kind.\nHi\n").trained("Hello").trained(kGpt2Eos);
  e.masked("Bye\n").trained("Goodbye").trained(kGpt2Eos);
  expect_sample(plain.render(messages, false), e.sample);
}

TEST(ChatTemplate, PlainUsesTheConfigEos) {
  // Qwen3's tokenizer_config.json says eos_token = <|im_end|>.
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  TokenizerConfig config = read_tokenizer_config(fixtures_dir() / "qwen3");
  EXPECT_EQ(config.eos_token, "<|im_end|>");
  SpecialIds special = resolve_special_ids(qwen, config);
  EXPECT_EQ(special.eos, kImEnd);
  EXPECT_TRUE(special.prefix.empty());  // ByteLevel post-processor: no BOS
  // Without a config: <|endoftext|>.
  EXPECT_EQ(resolve_special_ids(qwen, {}).eos, kEndOfText);
}

// The Qwen3 tokenizer with Llama-3's special tokens added, a Llama-3-like
// post-processor (BOS before the text) and a tokenizer_config.json with a
// Llama-3 chat template: enough to check the llama3 layout with real BPE.
class Llama3Like : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("lazytrain_chat_template_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    std::ifstream in(fixtures_dir() / "qwen3" / "tokenizer.json");
    nlohmann::json tokenizer = nlohmann::json::parse(in);
    uint32_t id = kBeginOfText;
    for (const char* token :
         {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}) {
      tokenizer["added_tokens"].push_back(testing::special_added_token(id++, token));
    }
    tokenizer["post_processor"] = nlohmann::json::parse(R"({
      "type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [], "special_tokens": {}}]})");
    std::ofstream(dir_ / "tokenizer.json") << tokenizer.dump();
    nlohmann::json config = {
        {"bos_token", "<|begin_of_text|>"},
        {"eos_token", "<|eot_id|>"},
        {"chat_template",
         "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
         "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"}};
    std::ofstream(dir_ / "tokenizer_config.json") << config.dump();
    tokenizer_ = new Tokenizer(Tokenizer::load(dir_));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
    fs::remove_all(dir_);
  }

  static fs::path dir_;
  static Tokenizer* tokenizer_;
};
fs::path Llama3Like::dir_;
Tokenizer* Llama3Like::tokenizer_ = nullptr;

TEST_F(Llama3Like, ConfigResolvesTemplateEosAndPrefix) {
  TokenizerConfig config = read_tokenizer_config(dir_ / "tokenizer.json");
  EXPECT_EQ(resolve_template_kind("auto", config), TemplateKind::kJinja);
  EXPECT_EQ(config.prefix_tokens, std::vector<std::string>{"<|begin_of_text|>"});
  SpecialIds special = resolve_special_ids(*tokenizer_, config);
  EXPECT_EQ(special.eos, kEotId);
  EXPECT_EQ(special.prefix, std::vector<uint32_t>{kBeginOfText});
}

TEST_F(Llama3Like, Llama3LayoutAndMasks) {
  const Tokenizer& t = *tokenizer_;
  ChatTemplate llama3(TemplateKind::kLlama3, t,
                      resolve_special_ids(t, read_tokenizer_config(dir_)));
  // Content is trimmed, as the template's `| trim`: Python's str.strip(),
  // which takes U+3000, U+00A0, U+2003 and U+202F for whitespace too
  // ("\u3000 Hi there\u00a0\n".strip() == "Hi there" in Python 3.11).
  std::vector<ChatMessage> messages = {{Role::kSystem, "Be brief."},
                                       {Role::kUser, "\u3000 Hi there\u00a0\n"},
                                       {Role::kAssistant, "\u2003\nHello!\u202f "},
                                       {Role::kUser, "Bye"},
                                       {Role::kAssistant, "Bye."}};
  // <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>...
  Expected e{t};
  e.masked(kBeginOfText);
  e.masked(kStartHeader).masked("system").masked(kEndHeader).masked("\n\nBe brief.").masked(kEotId);
  e.masked(kStartHeader).masked("user").masked(kEndHeader).masked("\n\nHi there").masked(kEotId);
  e.masked(kStartHeader).masked("assistant").masked(kEndHeader).masked("\n\n");
  e.trained("Hello!").trained(kEotId);
  e.masked(kStartHeader).masked("user").masked(kEndHeader).masked("\n\nBye").masked(kEotId);
  e.masked(kStartHeader).masked("assistant").masked(kEndHeader).masked("\n\n");
  e.trained("Bye.").trained(kEotId);
  Sample sample = llama3.render(messages, false);
  expect_sample(sample, e.sample);
  EXPECT_EQ(t.decode(std::vector<uint32_t>(sample.ids.begin(), sample.ids.end())),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nBye.<|eot_id|>");
  Sample all = llama3.render(messages, true);
  EXPECT_EQ(all.ids, sample.ids);
  EXPECT_EQ(all.labels, all.ids);
}

TEST_F(Llama3Like, PlainPutsThePostProcessorPrefixFirst) {
  const Tokenizer& t = *tokenizer_;
  ChatTemplate plain(TemplateKind::kPlain, t, resolve_special_ids(t, read_tokenizer_config(dir_)));
  std::vector<ChatMessage> messages = {{Role::kUser, "Q"}, {Role::kAssistant, "A"}};
  Expected e{t};
  e.masked(kBeginOfText).masked("Q\n").trained("A").trained(kEotId);
  expect_sample(plain.render(messages, false), e.sample);
}

TEST(ChatTemplateConfig, AutoRendersTheConfigsTemplate) {
  EXPECT_EQ(resolve_template_kind("auto", read_tokenizer_config(fixtures_dir() / "qwen3")),
            TemplateKind::kJinja);
  // A tokenizer.json path reads the config beside it.
  EXPECT_EQ(resolve_template_kind(
                "auto", read_tokenizer_config(fixtures_dir() / "qwen3" / "tokenizer.json")),
            TemplateKind::kJinja);
  // Qwen2.5's template (abridged): ChatML without the think logic.
  TokenizerConfig qwen25;
  qwen25.chat_template =
      "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + "
      "message.content + '<|im_end|>' + '\\n' }}{%- endfor %}";
  EXPECT_EQ(resolve_template_kind("auto", qwen25), TemplateKind::kJinja);
  EXPECT_EQ(resolve_template_kind("qwen3", qwen25), TemplateKind::kQwen3);
  EXPECT_EQ(resolve_template_kind("chatml", read_tokenizer_config(fixtures_dir() / "qwen3")),
            TemplateKind::kChatml);
  // GPT-2's folder has no tokenizer_config.json.
  EXPECT_EQ(resolve_template_kind("auto", read_tokenizer_config(fixtures_dir() / "gpt2")),
            TemplateKind::kPlain);
  EXPECT_EQ(resolve_template_kind("auto", {}), TemplateKind::kPlain);
  EXPECT_EQ(resolve_template_kind("llama3", {}), TemplateKind::kLlama3);
  EXPECT_THROW(resolve_template_kind("vicuna", {}), Error);
}

TEST(ChatTemplateConfig, ReadsAListOfNamedTemplatesAndTokenObjects) {
  fs::path dir = fs::temp_directory_path() / ("lazytrain_chat_config_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << R"({
    "chat_template": [{"name": "tool_use", "template": "<|start_header_id|>"},
                      {"name": "default", "template": "<|im_start|>"}],
    "eos_token": {"content": "<|im_end|>", "special": true}})";
  TokenizerConfig config = read_tokenizer_config(dir);
  EXPECT_EQ(config.chat_template, "<|im_start|>");
  EXPECT_EQ(config.eos_token, "<|im_end|>");
  EXPECT_EQ(resolve_template_kind("auto", config), TemplateKind::kJinja);

  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": 7})";
  try {
    read_tokenizer_config(dir);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json: field \"eos_token\""),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(ChatTemplateConfig, MissingSpecialTokensAreErrors) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  try {
    ChatTemplate(TemplateKind::kChatml, gpt2, resolve_special_ids(gpt2, {}));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs the special token <|im_start|>"), std::string::npos)
        << e.what();
  }
  TokenizerConfig config;
  config.eos_token = "<|nope|>";
  EXPECT_THROW(resolve_special_ids(gpt2, config), Error);
}

}  // namespace
}  // namespace lt::data
