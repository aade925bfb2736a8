#pragma once
// Every file lazytrain reads as input (weights, config.json, tokenizer
// files, datasets) must be a regular file. Opening a named pipe for reading
// blocks until some other process opens it for writing, so a FIFO left
// where model.safetensors should be hung the program forever; a character
// device such as /dev/zero never ends, so reading it "whole" grows memory
// until the kernel kills the process. Both are refused, by name, before the
// file is opened.
#include <filesystem>
#include <string>

namespace lt {

// Throws lt::Error naming `path` and what it is (a named pipe, a character
// device, a folder, ...) unless it is a regular file or a symbolic link to
// one. A path that does not exist is left to the caller's own message.
void require_regular_file(const std::filesystem::path& path);

// "" when `path` is a regular file (or a link to one); otherwise what a
// config key's message says of it: "no file 'PATH'", or "'PATH' is a
// folder, not a file" (a named pipe, a device, ...).
std::string why_not_a_file(const std::filesystem::path& path);

// `path` made absolute, or the nearest folder above it that exists (a
// folder a run will create, or a path mistyped): a file system to ask for
// free space, or a place to name. `error` is set when a folder on the way
// cannot be searched.
std::filesystem::path nearest_existing_folder(const std::filesystem::path& path,
                                              std::error_code& error);

}  // namespace lt
