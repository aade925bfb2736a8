#pragma once

namespace lt::cli {

// An installed lazytrain (`cmake --install`, the .deb, the Docker image)
// has no source tree, so the demo's bundled assets are installed beside the
// program, at LT_INSTALLED_ASSETS (relative to the program's folder, set by
// cmake/install.cmake: ../share/lazytrain/assets). When that folder exists
// and $LT_ASSETS_DIR is unset, this points $LT_ASSETS_DIR there, which is
// where train::assets_dir() looks first, and $LT_RECIPES_DIR at the recipes
// installed beside them (share/lazytrain/recipes). A binary in the build tree has no
// such folder and keeps the source tree's assets.
void use_installed_assets();

}  // namespace lt::cli
