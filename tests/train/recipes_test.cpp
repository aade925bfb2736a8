// recipes/*.yaml stay runnable: `lazytrain plan` finds each feasible on its
// model's real shape (bench/models, config.json) for its card and host
// memory; each trains two steps on a tiny
// fixture model as it is otherwise written (its executor, optimizer,
// schedule, packing, held-out split); its header carries measured figures
// that fit its card; and README's table lists it with those figures.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

fs::path recipes_dir() {
  return fs::path(LT_SOURCE_DIR) / "recipes";
}

std::vector<fs::path> recipe_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(recipes_dir()))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The "# key: value" lines of a recipe's header.
std::map<std::string, std::string> header_of(const fs::path& recipe) {
  std::map<std::string, std::string> fields;
  std::ifstream in(recipe);
  std::string line;
  const std::regex field(R"(^# ([a-z_]+): (.+)$)");
  while (std::getline(in, line) && line.rfind("#", 0) == 0) {
    std::smatch m;
    if (std::regex_match(line, m, field)) fields[m[1]] = m[2];
  }
  return fields;
}

// Runs the program; its stdout (and stderr) as text, and the exit status.
std::pair<int, std::string> run_program(const std::vector<std::string>& args, const fs::path& log) {
  Child child(args, log);
  const int status = child.wait(/*timeout_s=*/180);
  return {status, read_text(log)};
}

TEST(Recipes, ThereAreRecipesForSeveralShapesAndCards) {
  std::set<std::string> shapes, cards;
  for (const fs::path& recipe : recipe_files()) {
    const auto h = header_of(recipe);
    shapes.insert(h.count("shape") ? h.at("shape") : "");
    cards.insert(h.count("gpu_gb") ? h.at("gpu_gb") : "");
  }
  EXPECT_GE(shapes.size(), 4u);
  EXPECT_GE(cards.size(), 3u);
}

TEST(Recipes, EachHeaderHasMeasuredFiguresThatFitItsCard) {
  for (const fs::path& recipe : recipe_files()) {
    SCOPED_TRACE(recipe.string());
    const auto h = header_of(recipe);
    for (const char* key : {"shape", "gpu_gb", "host_gb", "measured_tokens_per_s",
                            "measured_gpu_peak_gb", "measured_host_peak_gb", "measured_on"}) {
      ASSERT_TRUE(h.count(key)) << "the header lacks '# " << key << ": ...'";
    }
    EXPECT_TRUE(fs::is_regular_file(fs::path(LT_SOURCE_DIR) / h.at("shape") / "config.json"));
    EXPECT_GT(std::stod(h.at("measured_tokens_per_s")), 0);
    EXPECT_LE(std::stod(h.at("measured_gpu_peak_gb")), std::stod(h.at("gpu_gb")));
    EXPECT_LE(std::stod(h.at("measured_host_peak_gb")), std::stod(h.at("host_gb")));
  }
}

TEST(Recipes, ReadmeTablesEachWithItsFigures) {
  const std::string readme = read_text(fs::path(LT_SOURCE_DIR) / "README.md");
  for (const fs::path& recipe : recipe_files()) {
    const std::string name = recipe.filename().string();
    const size_t at = readme.find("(recipes/" + name + ")");
    ASSERT_NE(at, std::string::npos) << "README.md's recipe table lacks " << name;
    const std::string row = readme.substr(at, readme.find('\n', at) - at);
    const auto h = header_of(recipe);
    EXPECT_NE(row.find(" " + h.at("measured_tokens_per_s") + " "), std::string::npos)
        << name << ": README's row '" << row << "' should give its tokens/s";
  }
}

// `lazytrain plan` on the recipe's model shape, batch, sequence length and
// optimizer, for a profile of its card and host memory (as written: not
// capped by this machine's free memory): the streaming planner finds a
// schedule, and the executor plan names for that card is the recipe's where
// plan knows it (resident or streaming; ZenFlow's choice is train's).
TEST(Recipes, PlanFindsEachFeasibleForItsCard) {
  TempDir tmp("recipes_plan");
  for (const fs::path& recipe : recipe_files()) {
    SCOPED_TRACE(recipe.string());
    const auto h = header_of(recipe);
    write_random_tokens(tmp / "rows.jsonl", 4, 97, 1);
    const TrainConfig c = load_train_config(
        recipe.string(), {"model.path=" + (fs::path(LT_SOURCE_DIR) / h.at("shape")).string(),
                          "data.path=" + (tmp / "rows.jsonl").string()});
    write_text(tmp / "hw.yaml",
               "gpu_memory_gb: " + h.at("gpu_gb") + "\nhost_memory_gb: " + h.at("host_gb") + "\n");
    const auto [status, text] = run_program(
        {"plan", "--model", c.model.path, "--hardware", (tmp / "hw.yaml").string(), "--batch-size",
         std::to_string(c.train.batch_size), "--seq-len", std::to_string(c.train.seq_len),
         "--optimizer", c.optim.name, "--micro-batch",
         // One forward's sequences when the recipe accumulates; else the
         // planner chooses the chunking.
         std::to_string(c.train.grad_accum > 1 ? c.train.batch_size / c.train.grad_accum : 0),
         "--json"},
        tmp / "plan.log");
    ASSERT_EQ(status, 0) << text;
    const nlohmann::json plan =
        nlohmann::json::parse(text.substr(text.find('{'), text.rfind('}') - text.find('{') + 1));
    EXPECT_TRUE(plan.at("feasible").get<bool>());
    if (c.exec.mode == "resident" || c.exec.mode == "streaming") {
      EXPECT_EQ(plan.at("executor"), c.exec.mode);
    }
    EXPECT_LE(plan.at("peak_bytes").at("host").get<double>(), std::stod(h.at("host_gb")) * 1e9);
    EXPECT_LE(plan.at("peak_bytes").at("gpu").get<double>(), std::stod(h.at("gpu_gb")) * 1e9);
  }
}

TEST(Recipes, EachTrainsTwoStepsOnATinyModel) {
  TempDir tmp("recipes_run");
  write_random_tokens(tmp / "rows.jsonl", 60, 97, 2, 8);
  for (const fs::path& recipe : recipe_files()) {
    SCOPED_TRACE(recipe.string());
    const std::string name = recipe.stem().string();
    // What a laptop-sized run changes: the model, the data, the length,
    // the device; the executor, optimizer, schedule and data keys stay.
    const TrainConfig c = load_train_config(
        recipe.string(),
        {"model.path=" + fixture("qwen2").string(), "data.path=" + (tmp / "rows.jsonl").string(),
         "data.format=tokens", "data.eval_split=0.1", "train.steps=2", "train.batch_size=4",
         "train.grad_accum=1", "train.seq_len=16", "train.eval_every=1", "train.save_every=0",
         "train.device=cpu", "out.dir=" + (tmp / name).string()});
    ASSERT_NO_THROW(train_quietly(c));
    const auto lines = read_metrics(tmp / name);
    ASSERT_EQ(lines.size(), 2u);
    for (const auto& line : lines) {
      EXPECT_TRUE(std::isfinite(line.at("loss").get<double>()));
      EXPECT_TRUE(line.contains("eval_loss"));
    }
  }
}

}  // namespace
}  // namespace lt::train::testing
