#pragma once
// Small helpers shared by the io tests: a temporary folder removed at the end
// of each test, raw file access, and the project's .venv Python.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace lt::io::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lt_io_test_XXXXXX").string();
    char* made = ::mkdtemp(tmpl.data());
    if (!made) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

inline std::filesystem::path source_dir() {
  return LT_SOURCE_DIR;
}
inline std::filesystem::path fixtures_dir() {
  return source_dir() / "tests" / "io" / "fixtures";
}

// The project's git-ignored virtual environment (tools/reference scripts
// run there); empty when it lacks `module`.
inline std::filesystem::path venv_python_with(const std::string& module) {
  std::filesystem::path py = source_dir() / ".venv" / "bin" / "python";
  if (!std::filesystem::exists(py)) return {};
  std::string cmd = py.string() + " -c 'import " + module + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0 ? py : std::filesystem::path{};
}

}  // namespace lt::io::testing
