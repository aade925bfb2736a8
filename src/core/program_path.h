#pragma once
// Programs this one starts (mpirun, gnuplot) are found in PATH and run
// without a shell, so that no path or setting is read as shell syntax.
#include <filesystem>
#include <string>

namespace lt {

// `name` in PATH (an executable file), or empty.
std::filesystem::path find_in_path(const std::string& name);

}  // namespace lt
