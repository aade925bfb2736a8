#include "plan/stage_times.h"

#include <fmt/format.h>
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

// The seconds at each of `batch_sizes` (three or more): positive, and
// never fewer for a larger chunk (the profiler writes them so).
std::vector<double> read_seconds(const YAML::Node& n, const std::string& key,
                                 const std::vector<int64_t>& batch_sizes,
                                 const std::string& source) {
  const auto expected = [&] {
    std::string sizes;
    for (int64_t b : batch_sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(b);
    return fmt::format(": expected {} numbers, the seconds for a chunk of each of batch_sizes [{}]",
                       batch_sizes.size(), sizes);
  };
  LT_CHECK(n.IsSequence() && n.size() == batch_sizes.size(), where(source, key, n), expected());
  std::vector<double> seconds;
  for (size_t k = 0; k < batch_sizes.size(); ++k) {
    double s = 0;
    try {
      s = n[k].as<double>();
    } catch (const YAML::Exception&) {
      fail(where(source, key, n), expected());
    }
    LT_CHECK(std::isfinite(s) && s > 0, where(source, key, n), ": gives ", s, " s at batch ",
             batch_sizes[k], " (times must be positive)");
    LT_CHECK(k == 0 || s >= seconds.back(), where(source, key, n), ": gives ", s, " s at batch ",
             batch_sizes[k], ", less than ", seconds.back(), " s at batch ", batch_sizes[k - 1],
             " (a larger chunk never takes less time)");
    seconds.push_back(s);
  }
  return seconds;
}

// A two-point profile's line [a, b], or a longer one's seconds at each size.
StageCurve read_curve(const YAML::Node& n, const std::string& key,
                      const std::vector<int64_t>& batch_sizes, const std::string& source) {
  if (batch_sizes.size() > 2) return {batch_sizes, read_seconds(n, key, batch_sizes, source)};
  const LinearFit fit = read_fit(n, key, source);
  for (int64_t b : batch_sizes)
    LT_CHECK(fit.at(static_cast<double>(b)) > 0, where(source, key, n), ": gives ",
             fit.at(static_cast<double>(b)), " s at batch ", b, " (times must be positive)");
  return StageCurve::line(fit, batch_sizes);
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

StageCurve StageCurve::line(const LinearFit& fit, std::vector<int64_t> batches) {
  StageCurve c;
  for (int64_t b : batches) c.seconds.push_back(fit.at(static_cast<double>(b)));
  c.batches = std::move(batches);
  return c;
}

LinearFit StageCurve::segment_at(double batch) const {
  if (batches.size() < 2) return {seconds.empty() ? 0.0 : seconds.front(), 0.0};
  size_t k = 1;
  while (k + 1 < batches.size() && batch > static_cast<double>(batches[k])) ++k;
  return fit_line(batches[k - 1], seconds[k - 1], batches[k], seconds[k]);
}

double StageCurve::chunked(int64_t batch, int64_t chunk) const {
  // An end segment extrapolates: on the H200 a line through two batch
  // sizes of the block forward came out at -0.6 ms + 0.84 ms per sequence
  // (the larger batch ran hotter and slower per sequence), which made
  // chunks of 4 look 10% faster per sequence than chunks of 8 where they
  // ran 3.5% slower. GEMMs over fewer rows never run faster per row, so
  // below the sizes timed the smallest one's rate per sequence is a floor;
  // above them the largest one's a ceiling. A segment with intercept >= 0
  // keeps both.
  const auto at_size = [&](int64_t b) {
    const double x = static_cast<double>(b);
    double t = at(x);
    if (!batches.empty() && b < batches.front())
      t = std::max(t, seconds.front() * x / static_cast<double>(batches.front()));
    if (!batches.empty() && b > batches.back()) {
      const double at_hi = seconds.back();
      // More sequences never take less time than fewer (a noisy fit of a
      // tiny stage can slope down).
      t = std::max(std::min(t, at_hi * x / static_cast<double>(batches.back())), at_hi);
    }
    return std::max(0.0, t);  // a chunk never takes negative time
  };
  if (chunk <= 0 || chunk >= batch) return at_size(batch);
  const int64_t whole = batch / chunk, rest = batch % chunk;
  return static_cast<double>(whole) * at_size(chunk) + (rest > 0 ? at_size(rest) : 0.0);
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
  // A time's form depends on batch_sizes, which may come after it: read
  // once every key is known.
  auto later = [](const YAML::Node&, const std::string&) {};
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
         LT_CHECK(n.IsSequence() && n.size() >= 2, where(source, key, n),
                  ": expected the batch sizes timed, ascending, [b1, b2, ...]");
         for (const YAML::Node& b : n) {
           t.batch_sizes.push_back(read_count(b, key, source));
           LT_CHECK(t.batch_sizes.size() < 2 || t.batch_sizes.end()[-2] < t.batch_sizes.back(),
                    where(source, key, n), ": expected the batch sizes in ascending order, got ",
                    t.batch_sizes.end()[-2], " before ", t.batch_sizes.back());
         }
       }},
  };
  for (const auto& f : kStageTimesShape) setters.emplace(f.name, count(t.*f.member));
  for (const auto& f : kStageTimeCurves) setters.emplace(f.name, later);
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
  std::map<std::string, StageCurve*> curves;
  for (const auto& f : kStageTimeCurves) curves.emplace(f.name, &(t.*f.member));
  for (const auto& [name, curve] : curves)
    *curve = read_curve(node[name], name, t.batch_sizes, source);
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
  // Two sizes: the line through them, as profiles have always been written.
  const bool lines = batch_sizes.size() == 2;
  os << "stage_times:  # seconds for a chunk of `batch` sequences"
     << (lines ? " = a + b * batch\n" : ", at each of batch_sizes\n");
  os << "  model_type: " << model_type << "\n";
  for (const auto& f : kStageTimesShape) os << "  " << f.name << ": " << this->*f.member << "\n";
  os << "  seq_len: " << seq_len << "\n";
  os << "  device: " << device << "\n";
  const auto list = [&](const auto& values) {
    std::string out;
    for (const auto& v : values) {
      std::ostringstream one;
      one.precision(9);
      one << v;
      out += (out.empty() ? "" : ", ") + one.str();
    }
    return "[" + out + "]";
  };
  os << "  batch_sizes: " << list(batch_sizes) << "\n";
  for (const auto& f : kStageTimeCurves) {
    const StageCurve& curve = this->*f.member;
    os << "  " << f.name << ": ";
    if (lines && curve.seconds.size() == 2) {
      const LinearFit fit = curve.segment_at(static_cast<double>(batch_sizes[0]));
      os << list(std::vector<double>{fit.a, fit.b}) << "\n";
    } else {
      os << list(curve.seconds) << "\n";
    }
  }
  if (has_working_sets()) {
    os << "  # bytes on the device for a chunk of `batch` sequences = a + b * batch\n";
    for (const auto& f : kStageBytesFits) {
      const LinearFit& fit = this->*f.member;
      os << "  " << f.name << ": " << list(std::vector<double>{fit.a, fit.b}) << "\n";
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

}  // namespace lt::plan
