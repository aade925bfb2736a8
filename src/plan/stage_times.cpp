#include "plan/stage_times.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>

#include "core/error.h"
#include "plan/stage_times_fields.h"
#include "plan/yaml_keys.h"

namespace lt::plan {

namespace {

std::string where(const std::string& source, const std::string& key, const YAML::Node& n) {
  const std::string line =
      n.Mark().line >= 0 ? " (line " + std::to_string(n.Mark().line + 1) + ")" : "";
  return source + ": key 'stage_times." + key + "'" + line;
}

int64_t read_count(const YAML::Node& n, const std::string& key, const std::string& source) {
  int64_t v = 0;
  try {
    LT_CHECK(n.IsScalar(), where(source, key, n), ": expected a whole number");
    v = n.as<int64_t>();
  } catch (const YAML::Exception&) {
    fail(where(source, key, n), ": expected a whole number, got '", n.Scalar(), "'");
  }
  LT_CHECK(v > 0, where(source, key, n), ": must be > 0, got ", v);
  return v;
}

LinearFit read_fit(const YAML::Node& n, const std::string& key, const std::string& source) {
  LT_CHECK(n.IsSequence() && n.size() == 2, where(source, key, n),
           ": expected [a, b] (seconds = a + b * batch)");
  LinearFit f;
  try {
    f.a = n[0].as<double>();
    f.b = n[1].as<double>();
  } catch (const YAML::Exception&) {
    fail(where(source, key, n), ": expected two numbers [a, b]");
  }
  LT_CHECK(std::isfinite(f.a) && std::isfinite(f.b) && f.b >= 0, where(source, key, n),
           ": the slope b must be a finite number >= 0, got [", f.a, ", ", f.b, "]");
  return f;
}

}  // namespace

LinearFit fit_line(int64_t batch1, double seconds1, int64_t batch2, double seconds2) {
  LT_CHECK(batch1 != batch2, "stage times: a line needs two different batch sizes, got ", batch1,
           " twice");
  LinearFit f;
  f.b = (seconds2 - seconds1) / static_cast<double>(batch2 - batch1);
  f.a = seconds1 - f.b * static_cast<double>(batch1);
  return f;
}

StageTimes StageTimes::for_model(const models::ModelConfig& c, int64_t seq_len) {
  StageTimes t;
  t.model_type = c.model_type();
  for (const auto& f : kStageTimesShape) t.*f.member = c.*f.config;
  t.seq_len = seq_len;
  return t;
}

StageTimes StageTimes::from_yaml(const YAML::Node& node, const std::string& source) {
  LT_CHECK(node.IsMap(), source,
           ": key 'stage_times': expected a mapping (see "
           "src/plan/stage_times.h; `lazytrain profile --model` writes it)");
  StageTimes t;
  t.source = source;
  using Setter = YamlSetter;
  auto count = [&](int64_t& field) -> Setter {
    return [&](const YAML::Node& n, const std::string& key) { field = read_count(n, key, source); };
  };
  auto fit = [&](LinearFit& field) -> Setter {
    return [&](const YAML::Node& n, const std::string& key) { field = read_fit(n, key, source); };
  };
  auto text = [&](std::string& field) -> Setter {
    return [&](const YAML::Node& n, const std::string& key) {
      LT_CHECK(n.IsScalar() && !n.Scalar().empty(), where(source, key, n), ": expected a name");
      field = n.Scalar();
    };
  };
  std::map<std::string, Setter> setters = {
      {"model_type", text(t.model_type)},
      {"seq_len", count(t.seq_len)},
      {"device", text(t.device)},
      {"batch_sizes",
       [&](const YAML::Node& n, const std::string& key) {
         LT_CHECK(n.IsSequence() && n.size() == 2, where(source, key, n),
                  ": expected the two batch sizes timed, [b1, b2]");
         t.batch_sizes = {read_count(n[0], key, source), read_count(n[1], key, source)};
       }},
  };
  for (const auto& f : kStageTimesShape) setters.emplace(f.name, count(t.*f.member));
  for (const auto& f : kStageTimesFits) setters.emplace(f.name, fit(t.*f.member));
  for (const auto& f : kStageBytesFits) setters.emplace(f.name, fit(t.*f.member));
  apply_yaml_keys(node, setters, source, "stage_times.");
  // Every key is needed but the working sets (checked as a pair below).
  const auto optional = [](const std::string& name) {
    return std::any_of(std::begin(kStageBytesFits), std::end(kStageBytesFits),
                       [&](const auto& f) { return name == f.name; });
  };
  for (const auto& [name, _] : setters) {
    LT_CHECK(optional(name) || node[name], source, ": key 'stage_times.", name,
             "' is missing (every field is needed; `lazytrain profile --model` writes them all)");
  }
  // Every measured use must take positive time at the batch sizes timed.
  // A map, so that the first bad key named is the first alphabetically, as
  // with the missing keys above.
  std::map<std::string, const LinearFit*> fits;
  for (const auto& f : kStageTimesFits) fits.emplace(f.name, &(t.*f.member));
  for (const auto& [name, f] : fits) {
    for (int64_t b : t.batch_sizes)
      LT_CHECK(f->at(static_cast<double>(b)) > 0, where(source, name, node[name]), ": gives ",
               f->at(static_cast<double>(b)), " s at batch ", b, " (times must be positive)");
  }
  // The working sets come as a pair, each positive where it was measured.
  const bool block_bytes = static_cast<bool>(node["block_backward_bytes"]);
  LT_CHECK(block_bytes == static_cast<bool>(node["head_step_bytes"]), source,
           ": keys 'stage_times.block_backward_bytes' and 'stage_times.head_step_bytes' come "
           "together (`lazytrain profile --model` writes both)");
  for (const auto& f : kStageBytesFits) {
    if (!node[f.name]) continue;
    for (int64_t b : t.batch_sizes)
      LT_CHECK((t.*f.member).at(static_cast<double>(b)) > 0 && (t.*f.member).b > 0,
               where(source, f.name, node[f.name]), ": gives ",
               (t.*f.member).at(static_cast<double>(b)), " bytes at batch ", b, " with slope ",
               (t.*f.member).b, " (bytes and slope must be positive)");
  }
  return t;
}

std::string StageTimes::to_yaml() const {
  std::ostringstream os;
  os.precision(9);
  os << "stage_times:  # seconds for a chunk of `batch` sequences = a + b * batch\n";
  os << "  model_type: " << model_type << "\n";
  for (const auto& f : kStageTimesShape) os << "  " << f.name << ": " << this->*f.member << "\n";
  os << "  seq_len: " << seq_len << "\n";
  os << "  device: " << device << "\n";
  os << "  batch_sizes: [" << batch_sizes.at(0) << ", " << batch_sizes.at(1) << "]\n";
  for (const auto& f : kStageTimesFits) {
    const LinearFit& fit = this->*f.member;
    os << "  " << f.name << ": [" << fit.a << ", " << fit.b << "]\n";
  }
  if (has_working_sets()) {
    os << "  # bytes on the device for a chunk of `batch` sequences = a + b * batch\n";
    for (const auto& f : kStageBytesFits) {
      const LinearFit& fit = this->*f.member;
      os << "  " << f.name << ": [" << fit.a << ", " << fit.b << "]\n";
    }
  }
  return os.str();
}

void StageTimes::check_model(const models::ModelConfig& c) const {
  LT_CHECK(model_type == c.model_type(), source, ": key 'stage_times.model_type': measured for ",
           model_type, ", but the model is ", c.model_type(),
           " (run `lazytrain profile --model` for this model)");
  for (const auto& f : kStageTimesShape) {
    LT_CHECK(this->*f.member == c.*f.config, source, ": key 'stage_times.", f.name,
             "': measured for ", this->*f.member, ", but the model has ", c.*f.config,
             " (run `lazytrain profile --model` for this model)");
  }
}

double StageTimes::chunked(const LinearFit& fit, int64_t batch, int64_t chunk) const {
  // A line fitted through two batch sizes extrapolates: on the H200 the
  // block forward's came out at -0.6 ms + 0.84 ms per sequence (the larger
  // batch ran hotter and slower per sequence), which made chunks of 4 look
  // 10% faster per sequence than chunks of 8 where they ran 3.5% slower.
  // GEMMs over fewer rows never run faster per row, so below the sizes
  // timed the smallest one's rate per sequence is a floor; above them the
  // largest one's a ceiling. A line with intercept >= 0 already keeps both.
  const int64_t lo =
      batch_sizes.empty() ? 0 : *std::min_element(batch_sizes.begin(), batch_sizes.end());
  const int64_t hi =
      batch_sizes.empty() ? 0 : *std::max_element(batch_sizes.begin(), batch_sizes.end());
  const auto at = [&](int64_t b) {
    const double x = static_cast<double>(b);
    double t = fit.at(x);
    if (lo > 0 && b < lo) t = std::max(t, fit.at(static_cast<double>(lo)) * x / lo);
    if (hi > 0 && b > hi) {
      const double at_hi = fit.at(static_cast<double>(hi));
      // More sequences never take less time than fewer (a noisy fit of a
      // tiny stage can slope down).
      t = std::max(std::min(t, at_hi * x / hi), at_hi);
    }
    return std::max(0.0, t);  // a chunk never takes negative time
  };
  if (chunk <= 0 || chunk >= batch) return at(batch);
  const int64_t whole = batch / chunk, rest = batch % chunk;
  return static_cast<double>(whole) * at(chunk) + (rest > 0 ? at(rest) : 0.0);
}

}  // namespace lt::plan
