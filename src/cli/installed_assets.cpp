#include "cli/installed_assets.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace lt::cli {

void use_installed_assets() {
#ifdef LT_INSTALLED_ASSETS
  if (std::getenv("LT_ASSETS_DIR") != nullptr) return;
  std::error_code ec;
  // /proc/self/exe: the program's real path, wherever it was run from
  // (PATH, a symlink, a scratch root the .deb was extracted into).
  const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return;
  const std::filesystem::path assets = program.parent_path() / LT_INSTALLED_ASSETS;
  if (!std::filesystem::is_directory(assets / "demo", ec)) return;
  setenv("LT_ASSETS_DIR", assets.lexically_normal().c_str(), 0);
  // The recipes, installed beside the assets, for "@recipes/NAME".
  const std::filesystem::path recipes = (assets / ".." / "recipes").lexically_normal();
  const char* set = std::getenv("LT_RECIPES_DIR");  // set empty: as unset
  if ((set == nullptr || *set == '\0') && std::filesystem::is_directory(recipes, ec))
    setenv("LT_RECIPES_DIR", recipes.c_str(), 1);
#endif
}

}  // namespace lt::cli
