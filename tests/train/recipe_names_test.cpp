// Recipes by name (train/recipe_names.h): "@recipes/NAME" is the file in
// the source tree's recipes/ (an installed program's share/lazytrain/recipes,
// cmake/check_deb.cmake), wherever the command runs.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include <cstdlib>

#include "config_errors.h"
#include "train/recipe_names.h"

namespace lt::train::testing {
namespace {

class RecipeNames : public ConfigErrors {
 protected:
  RecipeNames() : here_(fs::current_path()) {
    unsetenv("LT_RECIPES_DIR");
    fs::current_path(tmp_.path());  // a folder with no recipes/
  }
  ~RecipeNames() override { fs::current_path(here_); }
  std::string error_loading(const std::string& file,
                            const std::vector<std::string>& overrides = {}) {
    try {
      load_train_config(file, overrides);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error loading " << file;
    return "";
  }
  fs::path here_;
};

TEST_F(RecipeNames, ARecipeLoadsByNameFromAnyFolder) {
  TrainConfig c;
  ASSERT_NO_THROW(c = load_train_config("@recipes/qwen2.5-0.5b_24gb.yaml",
                                        {"model.path=" + fixture("llama").string(),
                                         "data.path=" + (tmp_ / "data.jsonl").string()}));
  // The recipe's own values, read from the source tree's file.
  const YAML::Node recipe =
      YAML::LoadFile((fs::path(LT_SOURCE_DIR) / "recipes" / "qwen2.5-0.5b_24gb.yaml").string());
  EXPECT_EQ(c.train.batch_size, recipe["train"]["batch_size"].as<int>());
  EXPECT_EQ(c.exec.mode, recipe["exec"]["mode"].as<std::string>());
  // The name without its ".yaml" is the same recipe.
  TrainConfig short_name;
  ASSERT_NO_THROW(short_name = load_train_config("@recipes/qwen2.5-0.5b_24gb",
                                                 {"model.path=" + fixture("llama").string(),
                                                  "data.path=" + (tmp_ / "data.jsonl").string()}));
  EXPECT_EQ(short_name.train.batch_size, c.train.batch_size);
}

// Run as it is, a recipe's placeholder model.path is refused saying to
// give one's own.
TEST_F(RecipeNames, ARecipesPlaceholderModelPathSaysToGiveYours) {
  EXPECT_MENTIONS(error_loading("@recipes/qwen2.5-0.5b_24gb"),
                  "a recipe names where its model might be: give yours with --set "
                  "model.path=FOLDER");
  EXPECT_EQ(error_of(yaml(), {"model.path=" + (tmp_ / "nowhere").string()}).find("a recipe names"),
            std::string::npos);
}

TEST_F(RecipeNames, AnUnknownRecipeIsRefusedListingTheRecipes) {
  const std::string m = error_loading("@recipes/qwen2.5-9b.yaml");
  EXPECT_MENTIONS(m, "config file '@recipes/qwen2.5-9b.yaml': no recipe of that name in " +
                         (fs::path(LT_SOURCE_DIR) / "recipes").string());
  EXPECT_MENTIONS(m, "qwen2.5-0.5b_24gb.yaml, qwen2.5-1.5b_24gb.yaml");
}

// The old demo's config, named as its own paths are, from any folder: the
// installed program has no assets/ beside the working folder.
TEST_F(RecipeNames, AnAssetsConfigLoadsByNameFromAnyFolder) {
  TrainConfig c;
  ASSERT_NO_THROW(c = load_train_config("@assets/demo/gsm8k.yaml", {}));
  const YAML::Node file =
      YAML::LoadFile((fs::path(LT_SOURCE_DIR) / "assets" / "demo" / "gsm8k.yaml").string());
  EXPECT_EQ(c.train.steps, file["train"]["steps"].as<int64_t>());
  EXPECT_EQ(c.data.path,
            (fs::path(LT_SOURCE_DIR) / "assets" /
             file["data"]["path"].as<std::string>().substr(std::string("@assets/").size()))
                .string());
  EXPECT_MENTIONS(error_loading("@assets/demo/nothing.yaml"),
                  "config file '@assets/demo/nothing.yaml': no file " +
                      (fs::path(LT_SOURCE_DIR) / "assets" / "demo" / "nothing.yaml").string() +
                      " in the bundled assets");
}

// `--set model.path=@assets/demo/model` unquoted: YAML reserves '@' at a
// value's start ("not valid YAML (unknown token)"); the value is the path as
// written. A '#' after a space would start a comment and cut the value: refused.
TEST_F(RecipeNames, ASetValueStartingWithAtIsAPath) {
  TrainConfig c;
  ASSERT_NO_THROW(c = load_train_config("", {"data.tokenizer=@assets/demo/tokenizer"}));
  EXPECT_EQ(c.data.tokenizer, (fs::path(LT_SOURCE_DIR) / "assets" / "demo" / "tokenizer").string());
  const std::string m = error_loading("", {"data.path=data/my file #1.jsonl"});
  EXPECT_MENTIONS(m,
                  "--set data.path: YAML reads the '#' in 'data/my file #1.jsonl' as the start "
                  "of a comment");
  EXPECT_MENTIONS(m, "quote it (--set 'data.path=\"data/my file #1.jsonl\"')");
  // The quoting it names is taken, '#' and all.
  write_text(tmp_.path() / "my file #1.jsonl", "{\"input_ids\": [1, 2, 3]}\n");
  ASSERT_NO_THROW(c = load_train_config("", {"data.path=\"my file #1.jsonl\""}));
  EXPECT_EQ(c.data.path, (tmp_.path() / "my file #1.jsonl").string());
  // A '#' with no space before it is no comment in YAML: taken as written.
  ASSERT_NO_THROW(c = load_train_config("", {"out.dir=runs/a#1"}));
  EXPECT_EQ(fs::path(c.out.dir).filename(), "a#1");
}

// README's "lazytrain train recipes/NAME" run where there is no recipes/
// (an installed program): the name to write instead.
TEST_F(RecipeNames, ARecipesPathThatIsNotHereNamesTheRecipe) {
  EXPECT_MENTIONS(error_loading("recipes/qwen2.5-7b_24gb.yaml"),
                  "config file 'recipes/qwen2.5-7b_24gb.yaml' does not exist here; the recipe "
                  "of that name is '@recipes/qwen2.5-7b_24gb.yaml'");
  // Neither a file here nor a recipe: the plain message.
  EXPECT_MENTIONS(error_loading("recipes/mine.yaml"),
                  "config file 'recipes/mine.yaml' does not exist");
  // The demo's own header says "lazytrain train assets/demo/gsm8k.yaml".
  EXPECT_MENTIONS(error_loading("assets/demo/gsm8k.yaml"),
                  "config file 'assets/demo/gsm8k.yaml' does not exist here; the bundled file "
                  "of that name is '@assets/demo/gsm8k.yaml'");
  EXPECT_MENTIONS(error_loading("assets/demo/mine.yaml"),
                  "config file 'assets/demo/mine.yaml' does not exist");
}

TEST_F(RecipeNames, LtRecipesDirPointsElsewhere) {
  fs::create_directories(tmp_ / "mine");
  write_text(tmp_ / "mine" / "small.yaml", yaml());
  setenv("LT_RECIPES_DIR", (tmp_ / "mine").c_str(), 1);
  TrainConfig c;
  EXPECT_NO_THROW(c = load_train_config("@recipes/small.yaml", {}));
  EXPECT_EQ(c.train.steps, 2);
  EXPECT_MENTIONS(error_loading("@recipes/big.yaml"), "the recipes are small.yaml");
  fs::create_directories(tmp_ / "empty");
  setenv("LT_RECIPES_DIR", (tmp_ / "empty").c_str(), 1);
  EXPECT_MENTIONS(error_loading("@recipes/big.yaml"),
                  "the recipes are none (the folder holds no .yaml)");
  // Set empty, it is as unset: the source tree's.
  setenv("LT_RECIPES_DIR", "", 1);
  EXPECT_EQ(recipes_dir(), fs::path(LT_SOURCE_DIR) / "recipes");
  unsetenv("LT_RECIPES_DIR");
}

}  // namespace
}  // namespace lt::train::testing
