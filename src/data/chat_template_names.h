#pragma once
// The names data.template and --template take (data::resolve_template_kind
// resolves them): auto, then the built-in layouts.
#include <string>
#include <vector>

namespace lt::data {

inline const std::vector<std::string> kChatTemplateNames = {"auto", "chatml", "qwen3", "llama3",
                                                            "plain"};

}  // namespace lt::data
