#include "train/config_key_hint.h"

#include <algorithm>
#include <cctype>

namespace lt::train {
namespace {

std::string last_part(const std::string& key) {
  return key.substr(key.rfind('.') + 1);
}

std::string lowered(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Edits (insert, delete, replace, swap of neighbours) from a to b.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string config_key_hint(const std::string& unknown, const std::vector<std::string>& known) {
  const std::string name = last_part(unknown);
  std::vector<std::string> elsewhere;
  for (const std::string& key : known)
    if (last_part(key) == name && key != unknown) elsewhere.push_back(key);
  if (!elsewhere.empty() && elsewhere.size() <= 3) {
    std::string where;
    for (const std::string& key : elsewhere)
      where += (where.empty() ? "" : " or ") + key.substr(0, key.rfind('.')) + " (" + key + ")";
    return "; '" + name + "' is a key of " + where;
  }
  // A near spelling of a key in the same place (the same section, or among
  // the sections for a section), case and "_" left out: batchsize, stpes.
  const auto bare = [](const std::string& s) {
    std::string out;
    for (char c : lowered(s))
      if (c != '_' && c != '-') out += c;
    return out;
  };
  const bool is_section = unknown.find('.') == std::string::npos;
  const std::string prefix = is_section ? "" : unknown.substr(0, unknown.rfind('.') + 1);
  std::string best;
  size_t best_distance = std::max<size_t>(1, std::min<size_t>(2, name.size() / 3)) + 1;
  std::vector<std::string> places;
  for (const std::string& key : known) {
    if (is_section) {
      places.push_back(key.substr(0, key.find('.')));
    } else if (key.rfind(prefix, 0) == 0 && key.find('.', prefix.size()) == std::string::npos) {
      places.push_back(key);
    }
  }
  for (const std::string& candidate : places) {
    const size_t distance = edit_distance(bare(name), bare(last_part(candidate)));
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  // A key cut short (topk for topk_ratio, warmup for warmup_steps or
  // warmup_ratio): the keys of the place that it begins, two at most.
  if (best.empty() && bare(name).size() >= 3) {
    std::sort(places.begin(), places.end());
    places.erase(std::unique(places.begin(), places.end()), places.end());
    std::vector<std::string> begun;
    for (const std::string& candidate : places)
      if (bare(last_part(candidate)).starts_with(bare(name))) begun.push_back(candidate);
    if (begun.size() == 1) return "; did you mean '" + begun[0] + "'?";
    if (begun.size() == 2) return "; did you mean '" + begun[0] + "' or '" + begun[1] + "'?";
  }
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

}  // namespace lt::train
