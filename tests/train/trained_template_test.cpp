// `generate` and `eval` on a checkpoint prompt in the chat template its run
// trained with (train/trained_template.h), not the tokenizer's own Jinja
// template that "auto" takes: a run with data.template chatml is saved, and
// the commands' prompts on that checkpoint are compared with ChatML prompts
// built by hand from the layout in data/chat_template.h. The model is the
// Llama fixture (97 ids) with a tokenizer made here: the printable ASCII
// characters ' ' to '|' as ids 0..92, <unk> (93, every other byte, "\n"
// among them), <|im_start|> (94), <|im_end|> (95), <|endoftext|> (96), and
// a Jinja template of its own in tokenizer_config.json.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "data/builtin_template_jinja.h"
#include "data/byte_level.h"
#include "data/chat_template_jinja.h"
#include "data/prompt_rows.h"
#include "data/tokenizer.h"
#include "io/hf_model.h"
#include "support/byte_level_tokenizer.h"
#include "support/cli_run.h"
#include "support/generate_rows.h"
#include "train/generation.h"
#include "train/trained_template.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

constexpr int32_t kUnk = 93, kImStart = 94, kImEnd = 95, kEndOfText = 96;
constexpr int32_t kFolderEos = 2;  // the fixture's generation_config.json

void append_text(std::vector<int32_t>& ids, const std::string& text) {
  for (char c : text) ids.push_back(c == '\n' ? kUnk : c - 0x20);
}

// What chatml renders for one user message up to the assistant's answer:
// <|im_start|>user\n TEXT <|im_end|>\n <|im_start|>assistant\n.
std::vector<int32_t> chatml_prompt(const std::string& text) {
  std::vector<int32_t> ids = {kImStart};
  append_text(ids, "user\n" + text);
  ids.push_back(kImEnd);
  append_text(ids, "\n");
  ids.push_back(kImStart);
  append_text(ids, "assistant\n");
  return ids;
}

using lt::testing::CliResult;

class TrainedTemplate : public ::testing::Test {
 protected:
  TrainedTemplate() : tmp_("trained_template") {}

  void SetUp() override {
    fs::create_directories(tok());
    nlohmann::json vocab = nlohmann::json::object();
    for (char c = 0x20; c < 0x7D; ++c) vocab[data::byte_level_encode(std::string(1, c))] = c - 0x20;
    vocab["<unk>"] = kUnk;
    std::vector<nlohmann::json> added;
    for (const auto& [id, content] : {std::pair<int32_t, const char*>{kImStart, "<|im_start|>"},
                                      {kImEnd, "<|im_end|>"},
                                      {kEndOfText, "<|endoftext|>"}}) {
      added.push_back(lt::testing::special_token(id, content));
    }
    const nlohmann::json tokenizer = lt::testing::byte_level_tokenizer(vocab, added);
    write_text(tok() / "tokenizer.json", tokenizer.dump());
    // The tokenizer's own template, which "auto" renders: another layout.
    const nlohmann::json config = {
        {"eos_token", "<|endoftext|>"},
        {"chat_template",
         "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{% if m['role'] == "
         "'assistant' %}<|endoftext|>{% endif %} {% endfor %}{% if add_generation_prompt "
         "%}assistant: {% endif %}"}};
    write_text(tok() / "tokenizer_config.json", config.dump());
    std::string rows;
    for (const char* q : {"ab", "cd", "ef", "gh"})
      rows += nlohmann::json{{"query", q}, {"response", std::string(q) + "!"}}.dump() + "\n";
    write_text(tmp_ / "qr.jsonl", rows);
  }

  fs::path tok() const { return tmp_ / "tok"; }

  // A checkpoint of one step trained with data.template chatml.
  fs::path train_chatml_checkpoint() {
    train_quietly(fixture_config(fixture("llama"), tmp_ / "qr.jsonl", tmp_ / "out",
                                 {"data.format=query_response", "data.template=chatml",
                                  "data.tokenizer=" + tok().string(), "train.steps=1"}));
    return tmp_ / "out" / "step-1";
  }

  // `lazytrain ARGS`: stdout, and stderr apart.
  CliResult run(const std::string& args) {
    return lt::testing::run_lazytrain(args, tmp_ / "stderr.txt");
  }

  // What the library makes from `prompt` on the checkpoint's weights,
  // stopping where generate stops: the folder's EOS and the template's
  // turn end.
  static std::vector<int32_t> library(const fs::path& model_dir, const std::vector<int32_t>& prompt,
                                      int32_t turn_end) {
    const models::CausalLM model = io::load_hf_model(model_dir, DType::F32);
    GenerationOptions options;
    options.max_new_tokens = 8;
    options.eos_ids = {kFolderEos, turn_end};
    return generate(model, {prompt}, options)[0].tokens;
  }

  TempDir tmp_;
};

TEST_F(TrainedTemplate, GenerateAndEvalPromptACheckpointInTheTemplateItsRunTrainedWith) {
  const fs::path ck = train_chatml_checkpoint();
  const std::string generate = "generate --device cpu --max-new-tokens 8 --json --prompt hi";

  const CliResult taken = run(generate + " --model " + ck.string());
  ASSERT_EQ(taken.status, 0) << taken.err;
  EXPECT_EQ(
      lt::testing::generated_rows(taken.out).at(0).at("output_ids").get<std::vector<int32_t>>(),
      library(ck, chatml_prompt("hi"), kImEnd));
  EXPECT_MENTIONS(taken.err,
                  "generate: template chatml, which the checkpoint was trained with "
                  "(data.template in " +
                      (ck / "train_config.yaml").string() + ")");

  // The tokenizer's own template is another prompt, and another answer: the
  // comparison above tells the two apart.
  const data::Tokenizer tokenizer = data::Tokenizer::load(ck);
  const data::PromptRenderer own(tokenizer, tok(), "auto");
  ASSERT_EQ(own.template_name(), "jinja");
  const std::vector<int32_t> own_prompt = own.chat({{data::Role::kUser, "hi"}});
  ASSERT_NE(own_prompt, chatml_prompt("hi"));
  ASSERT_NE(library(ck, own_prompt, kEndOfText), library(ck, chatml_prompt("hi"), kImEnd));

  // An explicit --template wins, with no line about the checkpoint's; auto
  // is the checkpoint's own Jinja template, which is the chatml it carries.
  const CliResult chosen = run(generate + " --template auto --model " + ck.string());
  ASSERT_EQ(chosen.status, 0) << chosen.err;
  EXPECT_EQ(
      lt::testing::generated_rows(chosen.out).at(0).at("output_ids").get<std::vector<int32_t>>(),
      library(ck, chatml_prompt("hi"), kImEnd));
  EXPECT_EQ(chosen.err.find("checkpoint was trained with"), std::string::npos) << chosen.err;

  // eval: the loss over the same rows is --template chatml's, and says so.
  const std::string eval = "eval --json --data " + (tmp_ / "qr.jsonl").string() + " --model ";
  const CliResult loss = run(eval + ck.string());
  const CliResult chatml_loss = run(eval + ck.string() + " --template chatml");
  const CliResult auto_loss = run(eval + ck.string() + " --template auto");
  ASSERT_EQ(loss.status, 0) << loss.err;
  ASSERT_EQ(chatml_loss.status, 0) << chatml_loss.err;
  ASSERT_EQ(auto_loss.status, 0) << auto_loss.err;
  EXPECT_EQ(nlohmann::json::parse(loss.out).at("template"), "chatml");
  EXPECT_EQ(loss.out, chatml_loss.out);
  // The checkpoint's Jinja template marks the same tokens as chatml.
  EXPECT_EQ(nlohmann::json::parse(auto_loss.out).at("template"), "jinja");
  EXPECT_EQ(nlohmann::json::parse(auto_loss.out).at("loss"),
            nlohmann::json::parse(loss.out).at("loss"));
  EXPECT_MENTIONS(loss.err, "eval: template chatml, which the checkpoint was trained with");

  // eval --task math prompts as generate does.
  const CliResult math = run("eval --task math --device cpu --max-new-tokens 4 --json --data " +
                             (tmp_ / "qr.jsonl").string() + " --model " + ck.string());
  ASSERT_EQ(math.status, 0) << math.err;
  EXPECT_EQ(nlohmann::json::parse(math.out).at("template"), "chatml");
  EXPECT_MENTIONS(math.err, "eval: template chatml, which the checkpoint was trained with");
}

// A run that trained on {"q", "a"} rows names its fields (data.prompt_field,
// data.response_field); eval and generate on its checkpoint read the same
// file with them, as train did, and say so: the loss, the math answers and
// the generations are those of the same rows under the names detected
// (query, response). Given fields win, with no line; and train's own
// error for such rows names its config keys, not a command's options.
TEST_F(TrainedTemplate, EvalAndGenerateReadRowsWithTheFieldsTheRunTrainedWith) {
  std::string rows;
  for (const char* q : {"ab", "cd", "ef", "gh"})
    rows += nlohmann::json{{"q", q}, {"a", std::string(q) + "!"}}.dump() + "\n";
  const fs::path qa = tmp_ / "qa.jsonl", qr = tmp_ / "qr.jsonl";
  write_text(qa, rows);
  try {
    train_quietly(fixture_config(
        fixture("llama"), qa, tmp_ / "unnamed",
        {"data.format=query_response", "data.tokenizer=" + tok().string(), "train.steps=1"}));
    ADD_FAILURE() << "rows without known fields were trained on";
  } catch (const Error& e) {
    EXPECT_MENTIONS(std::string(e.what()),
                    "name them with data.prompt_field and data.response_field");
  }
  train_quietly(fixture_config(
      fixture("llama"), qa, tmp_ / "out",
      {"data.format=auto", "data.prompt_field=q", "data.response_field=a", "data.template=chatml",
       "data.tokenizer=" + tok().string(), "train.steps=1"}));
  const fs::path ck = tmp_ / "out" / "step-1";
  const std::string record = (ck / "train_config.yaml").string();

  // `ARGS --json` on the checkpoint, over the {"q", "a"} rows and over the
  // same rows under the names detected (query, response), which need the
  // record's q overridden.
  const auto on_both = [&](const std::string& args) {
    const std::string command = args + " --json --model " + ck.string() + " --data ";
    const std::pair<CliResult, CliResult> r = {
        run(command + qa.string()), run(command + qr.string() + " --prompt-field query")};
    EXPECT_EQ(r.first.status, 0) << r.first.err;
    EXPECT_EQ(r.second.status, 0) << r.second.err;
    return r;
  };
  const auto [loss, known] = on_both("eval");
  EXPECT_EQ(loss.out, known.out);
  EXPECT_MENTIONS(loss.err,
                  "eval: prompt field q and response field a, which the checkpoint was "
                  "trained with (data.prompt_field, data.response_field in " +
                      record + "); --prompt-field and --response-field override them");
  EXPECT_EQ(known.err.find("prompt field q"), std::string::npos) << known.err;

  const auto [answers, known_answers] = on_both("eval --task math --device cpu --max-new-tokens 4");
  for (const char* key : {"n", "correct", "new_tokens"})
    EXPECT_EQ(nlohmann::json::parse(answers.out).at(key),
              nlohmann::json::parse(known_answers.out).at(key));
  EXPECT_EQ(nlohmann::json::parse(answers.out).at("n"), 4);

  const auto [made, known_made] = on_both("generate --device cpu --max-new-tokens 8");
  const auto ids = [](const CliResult& r) {
    std::vector<std::vector<int32_t>> out;
    for (const auto& row : lt::testing::generated_rows(r.out))
      out.push_back(row.at("output_ids").get<std::vector<int32_t>>());
    return out;
  };
  EXPECT_EQ(ids(made), ids(known_made));
  EXPECT_EQ(ids(made).size(), 4u);
  EXPECT_MENTIONS(made.err,
                  "generate: prompt field q, which the checkpoint was trained with "
                  "(data.prompt_field in " +
                      record + "); --prompt-field overrides it");

  // The trained fields are defaults for files that have them: rows without
  // a "q" are detected as without the record (they were forced to
  // query_response and refused: token rows "need a tokenizer", the
  // query/response rows "no prompt field q").
  const std::string on_ck = " --json --model " + ck.string() + " --data ";
  const CliResult detected = run("eval" + on_ck + qr.string());
  EXPECT_EQ(detected.status, 0) << detected.err;
  EXPECT_EQ(detected.out, known.out);
  EXPECT_EQ(detected.err.find("prompt field q"), std::string::npos) << detected.err;
  const fs::path tokens = tmp_ / "tokens.jsonl";
  write_text(tokens, "{\"input_ids\": [1, 2, 3, 4, 5]}\n{\"input_ids\": [6, 7, 8]}\n");
  for (const std::string command : {"eval", "generate --device cpu --max-new-tokens 3"}) {
    const CliResult r = run(command + on_ck + tokens.string());
    EXPECT_EQ(r.status, 0) << command << ": " << r.err;
    EXPECT_EQ(r.err.find("prompt field q"), std::string::npos) << r.err;
  }
}

// A folder without the record (a model folder, or a checkpoint whose
// train_config.yaml is gone) is prompted as before: auto, silently.
TEST_F(TrainedTemplate, AFolderWithoutTheRecordIsPromptedWithAutoAsBefore) {
  const fs::path ck = train_chatml_checkpoint();
  fs::remove(ck / "train_config.yaml");
  const CliResult r =
      run("generate --device cpu --max-new-tokens 8 --json --prompt hi --model " + ck.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const data::Tokenizer tokenizer = data::Tokenizer::load(ck);
  const data::PromptRenderer jinja(tokenizer, ck, "auto");
  ASSERT_TRUE(jinja.turn_end().has_value());
  EXPECT_EQ(lt::testing::generated_rows(r.out).at(0).at("output_ids").get<std::vector<int32_t>>(),
            library(ck, jinja.chat({{data::Role::kUser, "hi"}}), *jinja.turn_end()));
  EXPECT_EQ(r.err.find("trained with"), std::string::npos) << r.err;
  EXPECT_EQ(prompt_template(fixture("llama"), "", "generate").name, "auto");
}

// Sources of several templates: the first training source's is taken (a
// split-eval source does not count), and the line names the others; a
// record that cannot be read is said, and auto is used.
TEST_F(TrainedTemplate, MixedTemplatesAreNamedAndAnUnreadableRecordIsSaid) {
  const fs::path ck = tmp_ / "ck";
  fs::create_directories(ck);
  write_text(ck / "train_config.yaml",
             "data:\n  template: llama3\n  sources:\n"
             "    - {path: e.jsonl, template: qwen3, split: eval}\n"
             "    - {path: a.jsonl, template: chatml}\n"
             "    - {path: b.jsonl}\n"
             "    - {path: c.jsonl, template: chatml}\n");
  const PromptTemplate mixed = prompt_template(ck, "", "generate");
  EXPECT_EQ(mixed.name, "chatml");
  EXPECT_MENTIONS(mixed.note,
                  "template chatml, which the checkpoint was trained with "
                  "(data.sources[1].template in ");
  EXPECT_MENTIONS(mixed.note, "its other training sources used llama3 (b.jsonl)");
  EXPECT_EQ(mixed.note.find("qwen3"), std::string::npos) << mixed.note;
  EXPECT_EQ(prompt_template(ck, "plain", "generate").name, "plain");
  EXPECT_EQ(prompt_template(ck, "plain", "generate").note, "");

  write_text(ck / "train_config.yaml", "data:\n  template: [chatml\n");
  const PromptTemplate unreadable = prompt_template(ck, "", "eval");
  EXPECT_EQ(unreadable.name, "auto");
  EXPECT_MENTIONS(unreadable.note,
                  "eval: cannot read the chat template the checkpoint was "
                  "trained with from " +
                      (ck / "train_config.yaml").string());
}

// transformers' apply_chat_template reads the folder's Jinja template, not
// train_config.yaml: a checkpoint trained with chatml carries chatml as
// Jinja, in chat_template.jinja (which transformers reads first) and in
// place of tokenizer_config.json's template, whose other fields stay.
TEST_F(TrainedTemplate, ACheckpointCarriesTheBuiltInLayoutItTrainedWith) {
  const fs::path ck = train_chatml_checkpoint();
  const data::Tokenizer tokenizer = data::Tokenizer::load(tok());
  const std::string chatml = data::builtin_template_jinja(data::TemplateKind::kChatml, tokenizer,
                                                          data::read_tokenizer_config(tok()));
  EXPECT_EQ(read_text(ck / "chat_template.jinja"), chatml);
  nlohmann::json saved = nlohmann::json::parse(read_text(ck / "tokenizer_config.json"));
  nlohmann::json source = nlohmann::json::parse(read_text(tok() / "tokenizer_config.json"));
  EXPECT_EQ(saved.at("chat_template"), chatml);
  saved.erase("chat_template");
  source.erase("chat_template");
  EXPECT_EQ(saved, source);
  EXPECT_EQ(data::read_tokenizer_config(ck).chat_template, chatml);

  // With auto the tokenizer's own template is what was trained: the files
  // are copied as they are.
  train_quietly(fixture_config(fixture("llama"), tmp_ / "qr.jsonl", tmp_ / "auto",
                               {"data.format=query_response", "data.template=auto",
                                "data.tokenizer=" + tok().string(), "train.steps=1"}));
  EXPECT_FALSE(fs::exists(tmp_ / "auto" / "step-1" / "chat_template.jinja"));
  EXPECT_EQ(read_text(tmp_ / "auto" / "step-1" / "tokenizer_config.json"),
            read_text(tok() / "tokenizer_config.json"));
}

// A tokenizer with no chat template at all (GPT-2's, a base model's): auto
// trains the plain layout, so its checkpoint carries plain as Jinja, as a
// run with data.template plain does, and transformers' apply_chat_template
// lays prompts out as they were trained. It carried none, and
// apply_chat_template refused the folder (no chat_template set) while the
// explicit plain run's worked.
TEST_F(TrainedTemplate, AutoThatResolvedToPlainCarriesPlainAsExplicitPlainDoes) {
  fs::remove(tok() / "tokenizer_config.json");
  for (const std::string name : {"auto", "plain"}) {
    train_quietly(fixture_config(fixture("llama"), tmp_ / "qr.jsonl", tmp_ / name,
                                 {"data.format=query_response", "data.template=" + name,
                                  "data.tokenizer=" + tok().string(), "train.steps=1"}));
  }
  const fs::path ck = tmp_ / "auto" / "step-1";
  ASSERT_TRUE(fs::exists(ck / "chat_template.jinja"));
  const std::string jinja = read_text(ck / "chat_template.jinja");
  EXPECT_EQ(jinja, read_text(tmp_ / "plain" / "step-1" / "chat_template.jinja"));
  // Rendered as apply_chat_template renders it, the plain layout of
  // data/chat_template.h, by hand: "prompt\n", then "response" and EOS.
  const data::JinjaChatTemplate rendered(jinja, ck / "chat_template.jinja", std::nullopt,
                                         std::nullopt);
  const std::vector<data::ChatMessage> turn = {{data::Role::kUser, "ab"},
                                               {data::Role::kAssistant, "ab!"}};
  EXPECT_EQ(rendered.render_text(turn, false), "ab\nab!<|endoftext|>");
  EXPECT_EQ(rendered.render_text(std::span(turn).first(1), true), "ab\n");
  // eval reads the checkpoint's template as the tokens plain trains.
  const std::string eval = "eval --json --data " + (tmp_ / "qr.jsonl").string() + " --model ";
  const CliResult own = run(eval + ck.string());
  const CliResult plain = run(eval + ck.string() + " --template plain");
  ASSERT_EQ(own.status, 0) << own.err;
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(own.out).at("loss"), nlohmann::json::parse(plain.out).at("loss"));
  EXPECT_EQ(nlohmann::json::parse(own.out).at("tokens"),
            nlohmann::json::parse(plain.out).at("tokens"));

  // Text rows take no layout: under auto the checkpoint has no template,
  // as a base model on the Hub has none.
  write_text(tmp_ / "text.jsonl", "{\"text\": \"ab cd\"}\n{\"text\": \"ef gh\"}\n");
  train_quietly(fixture_config(fixture("llama"), tmp_ / "text.jsonl", tmp_ / "text",
                               {"data.format=auto", "data.template=auto",
                                "data.tokenizer=" + tok().string(), "train.steps=1"}));
  EXPECT_TRUE(fs::exists(tmp_ / "text" / "step-1" / "tokenizer.json"));
  EXPECT_FALSE(fs::exists(tmp_ / "text" / "step-1" / "chat_template.jinja"));
}

// Sources of several templates: the first training source's is written,
// and one line says so.
TEST_F(TrainedTemplate, ACheckpointOfMixedTemplatesCarriesTheFirstSourcesAndSaysSo) {
  write_text(tmp_ / "mixed.yaml",
             "data:\n  template: llama3\n  sources:\n"
             "    - {path: e.jsonl, template: qwen3, split: eval}\n"
             "    - {path: a.jsonl, template: chatml}\n"
             "    - {path: b.jsonl}\n");
  const data::Tokenizer tokenizer = data::Tokenizer::load(tok());
  const data::TokenizerConfig files = data::read_tokenizer_config(tok());
  const CheckpointTemplate mixed =
      checkpoint_template(read_train_config_unchecked(tmp_ / "mixed.yaml"), &tokenizer, tok());
  EXPECT_EQ(mixed.jinja,
            data::builtin_template_jinja(data::TemplateKind::kChatml, tokenizer, files));
  EXPECT_EQ(mixed.note,
            "checkpoints carry the chat template of the first training source, chatml "
            "(data.sources[1].template for a.jsonl); the other training sources used llama3 "
            "(b.jsonl)");

  write_text(tmp_ / "plain.yaml", "data:\n  template: plain\n  path: a.jsonl\n");
  const CheckpointTemplate plain =
      checkpoint_template(read_train_config_unchecked(tmp_ / "plain.yaml"), &tokenizer, tok());
  EXPECT_EQ(plain.jinja,
            data::builtin_template_jinja(data::TemplateKind::kPlain, {}, "<|endoftext|>"));
  EXPECT_EQ(plain.note, "");
  write_text(tmp_ / "auto.yaml", "data:\n  path: a.jsonl\n");
  EXPECT_EQ(
      checkpoint_template(read_train_config_unchecked(tmp_ / "auto.yaml"), &tokenizer, tok()).jinja,
      "");
}

}  // namespace
}  // namespace lt::train::testing
