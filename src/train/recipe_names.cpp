#include "train/recipe_names.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "train/config.h"

namespace lt::train {
namespace {

constexpr const char* kRecipePrefix = "@recipes/";

std::string recipe_list() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(recipes_dir(), ec))
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().filename().string());
  if (names.empty())
    return std::filesystem::is_directory(recipes_dir(), ec)
               ? "none (the folder holds no .yaml)"
               : "none (no folder " + recipes_dir().string() + ")";
  std::sort(names.begin(), names.end());
  std::string list;
  for (const auto& name : names) list += (list.empty() ? "" : ", ") + name;
  return list;
}

}  // namespace

std::filesystem::path recipes_dir() {
  if (const char* env = std::getenv("LT_RECIPES_DIR"); env && *env) return env;
  return std::filesystem::path(LT_SOURCE_DIR) / "recipes";
}

std::string resolve_config_file(const std::string& file) {
  const std::string prefix = kRecipePrefix;
  std::error_code ec;
  if (file.rfind(prefix, 0) == 0) {
    std::filesystem::path recipe = recipes_dir() / file.substr(prefix.size());
    if (recipe.extension() != ".yaml") recipe += ".yaml";  // "@recipes/qwen2.5-7b_24gb"
    LT_CHECK(std::filesystem::is_regular_file(recipe, ec), "config file '", file,
             "': no recipe of that name in ", recipes_dir().string(), "; the recipes are ",
             recipe_list());
    return recipe.string();
  }
  // As config paths read "@assets/" (the old demo's config is there).
  const std::string assets = "@assets/";
  if (file.rfind(assets, 0) == 0) {
    const std::filesystem::path asset = assets_dir() / file.substr(assets.size());
    LT_CHECK(std::filesystem::is_regular_file(asset, ec), "config file '", file, "': no file ",
             asset.string(), " in the bundled assets (", assets_dir().string(), ")");
    return asset.string();
  }
  // Run from another folder than the source tree, "recipes/x.yaml" or
  // "assets/demo/gsm8k.yaml" (as the bundled files' own headers write them)
  // name nothing: said with the name that works from anywhere.
  if (std::filesystem::exists(file, ec)) return file;
  for (const auto& [folder, dir, what] :
       {std::tuple{std::string("recipes/"), recipes_dir(), "the recipe"},
        std::tuple{std::string("assets/"), assets_dir(), "the bundled file"}}) {
    if (file.rfind(folder, 0) == 0 &&
        std::filesystem::is_regular_file(dir / file.substr(folder.size()), ec)) {
      fail("config file '", file, "' does not exist here; ", what, " of that name is '@", file,
           "' (", dir.string(), ")");
    }
  }
  return file;
}

}  // namespace lt::train
