#pragma once

#include <filesystem>
#include <string>

namespace lt::train {

// The recipes (configs for a model on a card, README "Recipes") by name:
// "@recipes/qwen2.5-7b_24gb.yaml" (or without ".yaml") names the file in
// recipes_dir(), so the
// same command works from the source tree and from an installed lazytrain,
// which has no recipes/ beside the working folder.
//
// The config file a command was given, as a path: "@recipes/NAME" and
// "@assets/PATH" (a bundled asset, as config paths name them) resolved, any
// other name as given. Throws, naming the recipes there are, for a
// recipe that does not exist; for a "recipes/NAME" or "assets/PATH" that
// does not exist in the working folder but is bundled, says to write
// "@recipes/NAME" or "@assets/PATH".
std::string resolve_config_file(const std::string& file);

// $LT_RECIPES_DIR (an installed lazytrain sets it: share/lazytrain/recipes),
// else the source tree's recipes/.
std::filesystem::path recipes_dir();

}  // namespace lt::train
