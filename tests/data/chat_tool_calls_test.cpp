// Tool-calling conversations (OpenAI-style tool_calls, tool turns, the row's
// tools) loaded from a dataset file as a user's training run loads them, and
// rendered by the models' own chat templates, against transformers'
// apply_chat_template(messages, tools=tools): the ids token for token, and
// labels derived from the text by each template's turn markers
// (fixtures/chat_template_tool_goldens.json, made by
// tools/reference/make_tool_call_goldens.py). A row transformers refuses is
// refused; the built-in layouts refuse what they cannot lay out.
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "chat_template_fixtures.h"
#include "core/error.h"
#include "data/chat_rows.h"
#include "data/dataset.h"
#include "data/prompt_rows.h"
#include "data/tokenizer.h"
#include "support/errors.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using lt::testing::error_of;
using testing::fixtures_dir;

// Ordered: a row's key order is what the template prints (tool-call
// arguments), so the rows are written as the goldens hold them.
nlohmann::ordered_json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::ordered_json::parse(in);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ToolCalls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("lazytrain_tool_calls_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    const nlohmann::json jinja_goldens =
        nlohmann::json::parse(read_text(fixtures_dir() / "chat_template_jinja_goldens.json"));
    testing::write_qwen3_with_added_specials(dir_, jinja_goldens.at("added_special_tokens"));
    tokenizer_ = new Tokenizer(Tokenizer::load(dir_));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    fs::remove_all(dir_);
  }

  // The folder's tokenizer_config.json holds `relative`'s template, with
  // bos/eos as in that model's config.
  // A .json fixture's chat_template may be a list of named templates.
  static void use_template(const std::string& relative) {
    const std::string text = read_text(fixtures_dir() / relative);
    nlohmann::json config = {{"chat_template", text}};
    if (relative.ends_with(".json"))
      config["chat_template"] = nlohmann::json::parse(text).at("chat_template");
    if (relative.find("mistral") != std::string::npos) {
      config["bos_token"] = "<s>";
      config["eos_token"] = "</s>";
    } else if (relative.find("llama3.1") != std::string::npos ||
               relative.find("eom_after_calls") != std::string::npos) {
      config["bos_token"] = "<|begin_of_text|>";
      config["eos_token"] = "<|eot_id|>";
    } else {
      config["eos_token"] = "<|im_end|>";
    }
    std::ofstream(dir_ / "tokenizer_config.json") << config.dump();
  }

  static fs::path write_rows(const std::vector<nlohmann::ordered_json>& rows) {
    const fs::path file = dir_ / "rows.jsonl";
    std::ofstream out(file);
    for (const auto& row : rows) out << row.dump() << "\n";
    return file;
  }

  static std::vector<Sample> load_file(const fs::path& file, const std::string& template_name,
                                       DatasetReport* report) {
    DatasetOptions options;
    options.template_name = template_name;
    options.tokenizer_path = dir_;
    options.strict = report == nullptr;
    options.accept_mostly_bad = true;  // the tests look at each bad row's report
    return load_dataset(file, tokenizer_, options, report);
  }
  static std::vector<Sample> load(const std::vector<nlohmann::ordered_json>& rows,
                                  const std::string& template_name = "auto",
                                  DatasetReport* report = nullptr) {
    return load_file(write_rows(rows), template_name, report);
  }

  // The trained tokens' text, a "|" for each untrained run, for failures.
  static std::string trained_text(const std::vector<int32_t>& labels) {
    std::string text;
    for (int32_t l : labels) {
      if (l < 0) {
        if (!text.ends_with("|")) text += "|";
        continue;
      }
      text += tokenizer_->decode(std::vector<uint32_t>{static_cast<uint32_t>(l)});
    }
    return text;
  }

  static nlohmann::ordered_json goldens() {
    return read_json(fixtures_dir() / "chat_template_tool_goldens.json");
  }

  static fs::path dir_;
  static Tokenizer* tokenizer_;
};
fs::path ToolCalls::dir_;
Tokenizer* ToolCalls::tokenizer_ = nullptr;

TEST_F(ToolCalls, RowsTrainAsTransformersRendersThem) {
  int rendered = 0, refused = 0;
  const nlohmann::ordered_json all = goldens();
  for (const auto& c : all.at("cases")) {
    const std::string where =
        c.at("template").get<std::string>() + " / " + c.at("conversation").get<std::string>();
    use_template(c.at("template"));
    const nlohmann::ordered_json& row = c.at("row");
    if (c.contains("error")) {
      const std::string error = error_of([&] { load({row}); });
      EXPECT_NE(error.find("rows.jsonl:1: the chat template refuses the row"), std::string::npos)
          << where << ": " << error;
      EXPECT_NE(error.find("a message without \"content\""), std::string::npos) << error;
      ++refused;
      continue;
    }
    const std::vector<Sample> samples = load({row});
    ASSERT_EQ(samples.size(), 1u) << where;
    EXPECT_EQ(samples[0].ids, c.at("ids").get<std::vector<int32_t>>())
        << where << "\n"
        << tokenizer_->decode(std::vector<uint32_t>(samples[0].ids.begin(), samples[0].ids.end()));
    EXPECT_EQ(samples[0].labels, c.at("labels").get<std::vector<int32_t>>())
        << where << "\n"
        << trained_text(samples[0].labels) << "\n----\n"
        << trained_text(c.at("labels").get<std::vector<int32_t>>());
    // The same row as a prompt for generation or evaluation: the turns
    // before the final answer, which is the reference.
    PromptOptions options;
    options.tokenizer_path = dir_;
    const PromptSet prompts = load_prompts(write_rows({row}), tokenizer_, options);
    ASSERT_EQ(prompts.rows.size(), 1u) << where;
    if (c.contains("prompt_ids")) {  // none where the answer's reasoning is trained
      EXPECT_EQ(prompts.rows[0].ids, c.at("prompt_ids").get<std::vector<int32_t>>()) << where;
    }
    const auto& turns = row.contains("messages") ? row.at("messages") : row.at("conversations");
    const auto& last = turns.back();
    EXPECT_EQ(prompts.rows[0].reference.value_or("<none>"),
              (last.contains("content") ? last.at("content") : last.at("value")).get<std::string>())
        << where;
    ++rendered;
  }
  // Six templates (one a tokenizer's default and tool_use pair, one whose
  // call turns end with <|eom_id|>, Mistral's), seven rows (Llama 3.1: five
  // of them; Mistral: its own with nine-character call ids, and one without
  // tools).
  EXPECT_EQ(rendered, 34);
  EXPECT_EQ(refused, 2);  // Qwen3's reads a content that is null or absent
}

TEST_F(ToolCalls, ToolsWrittenAsAJsonStringReadAsTheList) {
  const nlohmann::ordered_json golden =
      goldens().at("cases").at(1);  // Qwen2.5, content beside a call
  ASSERT_EQ(golden.at("conversation"), "content_beside_a_call");
  use_template(golden.at("template"));
  nlohmann::ordered_json row = golden.at("row");
  row["tools"] = row["tools"].dump();
  const std::vector<Sample> samples = load({row});
  EXPECT_EQ(samples.at(0).ids, golden.at("ids").get<std::vector<int32_t>>());
}

// transformers 5 saves a tokenizer's named templates as files:
// chat_template.jinja (default) and additional_chat_templates/tool_use.jinja.
TEST_F(ToolCalls, TheToolUseTemplateFileRendersRowsWithTools) {
  const nlohmann::ordered_json all = goldens();
  const nlohmann::json named =
      nlohmann::json::parse(read_text(fixtures_dir() / "chat_templates/default_and_tool_use.json"))
          .at("chat_template");
  std::ofstream(dir_ / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>"})";
  std::ofstream(dir_ / "chat_template.jinja") << named.at(0).at("template").get<std::string>();
  fs::create_directories(dir_ / "additional_chat_templates");
  std::ofstream(dir_ / "additional_chat_templates" / "tool_use.jinja")
      << named.at(1).at("template").get<std::string>();
  int checked = 0;
  for (const auto& c : all.at("cases")) {
    if (c.at("template") != "chat_templates/default_and_tool_use.json" || c.contains("error")) {
      continue;
    }
    EXPECT_EQ(load({c.at("row")}).at(0).ids, c.at("ids").get<std::vector<int32_t>>())
        << c.at("conversation");
    ++checked;
  }
  fs::remove(dir_ / "chat_template.jinja");
  fs::remove_all(dir_ / "additional_chat_templates");
  EXPECT_EQ(checked, 7);
}

// generate --prompt TEXT --tools FILE: the first user turn with the tools,
// as transformers' apply_chat_template(add_generation_prompt=True) renders it.
TEST_F(ToolCalls, AToolsFileRendersWithAPromptAsTransformers) {
  const nlohmann::ordered_json all = goldens();
  int checked = 0;
  for (const auto& c : all.at("cases")) {
    if (!c.contains("first_turn_prompt_ids") || !c.at("row").contains("tools")) continue;
    const std::string where =
        c.at("template").get<std::string>() + " / " + c.at("conversation").get<std::string>();
    use_template(c.at("template"));
    const fs::path file = dir_ / "tools.json";
    std::ofstream(file) << c.at("row").at("tools").dump();
    const PromptRenderer renderer(*tokenizer_, dir_, "auto");
    const auto& first = c.at("row").at("messages").at(0);
    EXPECT_EQ(renderer.chat({{Role::kUser, first.at("content").get<std::string>()}},
                            rows::read_tools_file(file)),
              c.at("first_turn_prompt_ids").get<std::vector<int32_t>>())
        << where;
    ++checked;
  }
  EXPECT_EQ(checked, 18);
  const fs::path bad = dir_ / "bad_tools.json";
  std::ofstream(bad) << R"({"tools": [1]})";
  EXPECT_EQ(
      error_of([&] { rows::read_tools_file(bad); }),
      bad.string() + ": field \"tools[0]\": expected an object (a JSON schema), found number");
  std::ofstream(bad) << "[{";
  EXPECT_NE(error_of([&] { rows::read_tools_file(bad); }).find(bad.string() + ": not valid JSON"),
            std::string::npos);
}

// A template whose turn end the tokenizer lacks as a special token (Qwen's
// in GPT-2's tokenizer): the load says the model will not learn to stop.
TEST_F(ToolCalls, ATemplateWhoseTurnEndIsNoSpecialTokenIsReported) {
  const fs::path folder = dir_ / "gpt2_with_qwen_template";
  fs::create_directories(folder);
  for (const char* name : {"encoder.json", "vocab.bpe"}) {
    fs::copy_file(fixtures_dir() / "gpt2" / name, folder / name,
                  fs::copy_options::overwrite_existing);
  }
  std::ofstream(folder / "chat_template.jinja")
      << read_text(fixtures_dir() / "chat_templates/qwen2.5.jinja");
  const Tokenizer gpt2 = Tokenizer::load(folder);
  std::ofstream(folder / "rows.jsonl")
      << R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]})"
      << "\n";
  DatasetOptions options;
  options.tokenizer_path = folder;
  DatasetReport report;
  load_dataset(folder / "rows.jsonl", &gpt2, options, &report);
  EXPECT_NE(report.warning.find("no special token of this tokenizer"), std::string::npos)
      << report.warning;
  use_template("chat_templates/qwen2.5.jinja");
  load({{{"messages",
          {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Hello"}}}}}},
       "auto", &report);
  EXPECT_EQ(report.warning, "");
}

// An empty tools list is no tools (Qwen3's template ignores it): the
// prompt is the one without tools, the empty think block included.
TEST_F(ToolCalls, AnEmptyToolsListAsksAsNoTools) {
  use_template("qwen3/tokenizer_config.json");
  const PromptRenderer renderer(*tokenizer_, dir_, "auto");
  const std::vector<ChatMessage> question = {{Role::kUser, "Hi"}};
  const std::vector<int32_t> without = renderer.chat(question);
  EXPECT_EQ(renderer.chat(question, jinja::Value::array()), without);
  const std::string text =
      tokenizer_->decode(std::vector<uint32_t>(without.begin(), without.end()));
  EXPECT_TRUE(text.ends_with("<think>\n\n</think>\n\n")) << text;
}

// A template that ignores add_generation_prompt and writes a space before
// each answer, on a row that starts with the assistant's turn: the space
// search stops at the text's start (it read before it, and the load died).
TEST_F(ToolCalls, ASpaceBeforeTheFirstAnswerAtTheStartOfTheText) {
  std::ofstream(dir_ / "tokenizer_config.json") << nlohmann::json{
      {"eos_token", "</s>"},
      {"chat_template",
       "{% for m in messages %}{% if m.role == 'user' %}{{ '[INST] ' + m.content "
       "+ '[/INST]' }}{% else %}{{ ' ' + m.content + eos_token }}{% endif %}{% "
       "endfor %}"}}.dump();
  const std::vector<Sample> samples = load({{{"messages",
                                              {{{"role", "assistant"}, {"content", "Welcome!"}},
                                               {{"role", "user"}, {"content", "Hi"}},
                                               {{"role", "assistant"}, {"content", "Hello"}}}}}});
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(trained_text(samples[0].labels), " Welcome!</s>| Hello</s>");
}

// Tool calls with no tools list (a misspelt "tool" key): said, though
// transformers renders the row as it is.
TEST_F(ToolCalls, RowsThatCallToolsWithoutAToolsListAreCounted) {
  use_template("chat_templates/qwen2.5.jinja");
  const nlohmann::ordered_json all = goldens();
  nlohmann::ordered_json with_tools = all.at("cases").at(1).at("row");  // content beside a call
  nlohmann::ordered_json misspelt = with_tools;
  misspelt["tool"] = misspelt["tools"];
  misspelt.erase("tools");
  DatasetReport report;
  EXPECT_EQ(load({with_tools, misspelt, misspelt}, "auto", &report).size(), 3u);
  EXPECT_EQ(report.warning,
            "2 rows call tools but have no \"tools\" list for the template to show");
  load({with_tools}, "auto", &report);
  EXPECT_EQ(report.warning, "");
}

// Arguments given as a JSON string (OpenAI's rows) are fine; a string that
// is not JSON is counted (the model would be trained on the broken text),
// also in a call without "function" around it.
TEST_F(ToolCalls, ArgumentsThatAreAStringButNotJsonAreCounted) {
  use_template("chat_templates/qwen2.5.jinja");
  const nlohmann::ordered_json all = goldens();
  nlohmann::ordered_json as_string = all.at("cases").at(1).at("row");
  nlohmann::ordered_json& call = as_string["messages"][1]["tool_calls"][0];
  call["function"]["arguments"] = R"({"city": "Oslo"})";
  nlohmann::ordered_json broken = as_string;
  broken["messages"][1]["tool_calls"][0]["function"]["arguments"] = R"({"city": "Oslo")";
  nlohmann::ordered_json flat = as_string;
  flat["messages"][1]["tool_calls"][0] = {{"name", "get_weather"}, {"arguments", "city=Oslo"}};
  DatasetReport report;
  EXPECT_EQ(load({as_string, broken, flat}, "auto", &report).size(), 3u);
  EXPECT_EQ(report.warning,
            "2 rows have tool-call arguments that are a string but not valid JSON: the model is "
            "trained on them as given");
  load({as_string}, "auto", &report);
  EXPECT_EQ(report.warning, "");
}

// Token rows take no template, but generation stops at its turn end.
TEST_F(ToolCalls, TokenPromptsStopAtTheTemplatesTurnEnd) {
  use_template("qwen3/tokenizer_config.json");
  std::ofstream(dir_ / "tokens.jsonl") << R"({"input_ids": [1, 2, 3]})"
                                       << "\n";
  PromptOptions options;
  options.tokenizer_path = dir_;
  const PromptSet prompts = load_prompts(dir_ / "tokens.jsonl", tokenizer_, options);
  EXPECT_EQ(prompts.format, "tokens");
  ASSERT_TRUE(prompts.turn_end.has_value());
  EXPECT_EQ(*prompts.turn_end, static_cast<int32_t>(*tokenizer_->token_to_id("<|im_end|>")));
  EXPECT_FALSE(load_prompts(dir_ / "tokens.jsonl", nullptr, options).turn_end.has_value());
}

TEST_F(ToolCalls, BadToolsAndFieldsNameTheRowAndField) {
  use_template("chat_templates/qwen2.5.jinja");
  const nlohmann::json turns = {{{"role", "user"}, {"content", "Hi"}},
                                {{"role", "assistant"}, {"content", "Hello"}}};
  DatasetReport report;
  const fs::path file = write_rows(
      {{{"messages", turns}, {"tools", 5}},
       {{"messages", turns}, {"tools", "[{\"type\": "}},
       {{"messages", turns}, {"tools", {"not an object"}}},
       // "DEEP" is written below as a list nested 100,000 deep, before another
       // key: an ordered object copies its values as it grows.
       {{"meta", "DEEP"}, {"messages", turns}},
       {{"messages", {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}}}}},
       {{"conversations",
         {{{"from", "human"}, {"value", "Hi"}},
          {{"from", "function_call"}, {"value", "{\"name\": "}}}}},
       {{"conversations",
         {{{"from", "human"}, {"value", "Hi"}},
          {{"from", "function_call"}, {"value", "{\"arguments\": {}}"}}}}},
       {{"system", "Be kind."},
        {"messages", {{{"role", "system"}, {"content", "Be brief."}}, turns[0], turns[1]}}},
       {{"messages",
         {turns[0], {{"role", "assistant"}, {"content", ""}, {"tool_calls", "get_weather()"}}}}},
       {{"messages", turns}, {"tools", "DEEP_STRING"}},  // a string of a list 100,000 deep
       // Accepted: tools "" or "null" are none (LLaMA-Factory writes "" in
       // rows without tools); two system turns without a row "system".
       {{"messages", turns}, {"tools", ""}},
       {{"messages", turns}, {"tools", "null"}},
       {{"messages",
         {{{"role", "system"}, {"content", "a"}},
          turns[0],
          {{"role", "system"}, {"content", "b"}},
          turns[1]}}},
       {{"messages", turns}}});
  // Deep enough to overflow the stack where a row's values are built
  // recursively.
  std::string text = read_text(file);
  const size_t at = text.find("\"DEEP\"");
  text.replace(at, 6, std::string(100000, '[') + std::string(100000, ']'));
  const size_t in_string = text.find("DEEP_STRING");
  text.replace(in_string, 11, std::string(100000, '[') + std::string(100000, ']'));
  std::ofstream(file) << text;
  load_file(file, "auto", &report);
  const std::string f = (dir_ / "rows.jsonl").string();
  EXPECT_EQ(report.problems,
            (std::vector<std::string>{
                f + ":1: field \"tools\": expected a list, found number",
                f + ":2: field \"tools\": a string that is not valid JSON",
                f + ":3: field \"tools[0]\": expected an object (a JSON schema), found string",
                f + ":4: nests deeper than 64",
                f + ":5: field \"messages[1].content\": missing",
                f + ":6: field \"conversations[1].value\": a function call that is not valid JSON",
                f + ":7: field \"conversations[1].value\": a function call without a \"name\": "
                    "{\"arguments\":{}}",
                f + ":8: field \"messages[0]\": a system turn beside the row's \"system\" field; "
                    "keep one of them",
                f + ":9: field \"messages[1].tool_calls\": expected a list of calls "
                    "({\"type\": \"function\", \"function\": {\"name\", \"arguments\"}}), found "
                    "\"get_weather()\"",
                f + ":10: field \"tools\": a string that nests deeper than 64",
            }));
  EXPECT_EQ(report.samples, 4);
}

TEST_F(ToolCalls, BuiltInLayoutsRefuseWhatOnlyTheModelsTemplateLaysOut) {
  use_template("chat_templates/qwen2.5.jinja");
  const nlohmann::json user = {{"role", "user"}, {"content", "Oslo?"}};
  const nlohmann::json answer = {{"role", "assistant"}, {"content", "Cold."}};
  const nlohmann::json call = {
      {"role", "assistant"},
      {"content", nullptr},
      {"tool_calls", {{{"function", {{"name", "get_weather"}, {"arguments", "{}"}}}}}}};
  const nlohmann::json result = {{"role", "tool"}, {"content", "-3"}};
  const nlohmann::json bare_call = {
      {"role", "assistant"},
      {"tool_calls", {{{"function", {{"name", "get_weather"}, {"arguments", "{}"}}}}}}};
  const nlohmann::json reasoned = {
      {"role", "assistant"}, {"content", "Cold."}, {"reasoning_content", "It is winter."}};
  const std::vector<std::pair<nlohmann::json, std::string>> rows = {
      {{{"messages", {user, call, result, answer}}}, "tool calls"},
      {{{"messages", {user, bare_call}}}, "tool calls"},
      {{{"messages", {user, result, answer}}}, "a tool turn"},
      {{{"messages", {user, answer}}, {"tools", {{{"type", "function"}}}}}, "tools"},
      {{{"messages", {user, reasoned}}}, "a separate reasoning field"},
  };
  for (const char* layout : {"chatml", "qwen3", "plain"}) {
    for (const auto& [row, what] : rows) {
      const std::string error = error_of([&] { load({row}, layout); });
      EXPECT_NE(error.find("the row has " + what), std::string::npos) << layout << ": " << error;
      EXPECT_NE(error.find("use it (template auto: --template auto, or data.template: auto)"),
                std::string::npos)
          << error;
    }
    // A name or an id beside role and content is not output: ignored there.
    // (A tokenizer without a template: "auto" is plain, and says why.)
    nlohmann::json named = {{"messages", {user, answer}}};
    named["messages"][0]["name"] = "ana";
    EXPECT_EQ(load({named}, layout).size(), 1u) << layout;
  }
  std::ofstream(dir_ / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>"})";
  const std::string error = error_of([&] { load({rows.front().first}); });
  EXPECT_NE(error.find("the row has tool calls, which only the model's own chat template knows"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("the tokenizer has no chat template of its own"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace lt::data
