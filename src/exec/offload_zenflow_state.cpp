// ZenFlow's device state in a checkpoint (Note [ZenFlow's saves]).
//
// Note [ZenFlow's saves]
// A save wrote the device's columns into the host masters and dropped the
// selection, so the next step chose columns anew with their moments at
// zero, as a reselection does: how often a run saved changed what it
// trained (the demo's 80 steps with every column on the device: loss 0.78
// unsaved, 0.90 saving every 10 steps, where resident AdamW gave 0.76). The
// device now keeps its columns and moments across a save, and the
// checkpoint holds them beside the CPU optimizer's states, named
// "executor.zenflow." + "<parameter>.columns" (i32, ascending), the device
// AdamW's state names, and "next_select_step", so that a resume takes up the
// same selection where the saving run went on with it: both continue bit
// for bit. A checkpoint without them (another executor's, or an older
// one) chooses afresh at the first step, as before; one whose column
// counts another exec.zenflow.topk_ratio gives does too, and says so.
#include <fmt/format.h>

#include <map>

#include "exec/offload_impl.h"
#include "exec/zenflow_policy.h"

namespace lt::exec {

namespace {

constexpr std::string_view kPrefix = "executor.zenflow.";
constexpr std::string_view kColumns = ".columns";
constexpr std::string_view kNextSelect = "next_select_step";

}  // namespace

optim::NamedTensors OffloadExecutor::Impl::zenflow_state() const {
  if (!options.zenflow || columns.empty() || !device_adam) return {};
  optim::NamedTensors out;
  const std::string prefix(kPrefix);
  for (size_t i = 0; i < weights.size(); ++i)
    out.emplace_back(
        prefix + names[i] + std::string(kColumns),
        Tensor::from_vector(columns[i].host, {static_cast<int64_t>(columns[i].host.size())}));
  for (const auto& [name, t] : device_adam->state())
    out.emplace_back(prefix + name, t.to(Device::cpu()));
  out.emplace_back(prefix + std::string(kNextSelect),
                   Tensor::from_vector(std::vector<int64_t>{next_select_step}, {1}));
  return out;
}

std::string OffloadExecutor::Impl::take_zenflow_state(const optim::NamedTensors& saved) {
  saved_selection.reset();
  if (!options.zenflow) return "";
  std::map<std::string, const Tensor*, std::less<>> own;
  for (const auto& [name, t] : saved)
    if (name.starts_with(kPrefix)) own.emplace(name.substr(kPrefix.size()), &t);
  const auto next = own.find(kNextSelect);
  if (next == own.end()) return "";  // none saved: chosen at the first step
  const std::string afresh =
      "; the device's columns are chosen afresh at the first step, their moments from zero";
  const Tensor& next_t = *next->second;
  if (next_t.dtype() != DType::I64 || next_t.numel() != 1)
    return "resume: the checkpoint's executor.zenflow.next_select_step is not one i64 value" +
           afresh;
  SavedSelection s;
  s.next_select_step = next_t.to(Device::cpu()).contiguous().data<int64_t>()[0];
  const double topk = options.zenflow_options.topk_ratio;
  for (size_t i = 0; i < weights.size(); ++i) {
    const auto it = own.find(names[i] + std::string(kColumns));
    if (it == own.end())
      return fmt::format("resume: the checkpoint names no ZenFlow columns of '{}'{}", names[i],
                         afresh);
    const Tensor& t = *it->second;
    const int64_t width = weights[i].dim() == 2 ? weights[i].size(1) : weights[i].numel();
    std::vector<int32_t> cols;
    if (t.dtype() == DType::I32 && t.dim() == 1)
      cols = t.to(Device::cpu()).contiguous().to_vector<int32_t>();
    const bool in_order = std::is_sorted(cols.begin(), cols.end()) &&
                          std::adjacent_find(cols.begin(), cols.end()) == cols.end() &&
                          (cols.empty() || (cols.front() >= 0 && cols.back() < width));
    if (cols.empty() || !in_order)
      return fmt::format(
          "resume: the checkpoint's ZenFlow columns of '{}' are not {} ascending "
          "column numbers below {}{}",
          names[i], "i32", width, afresh);
    const int64_t k = static_cast<int64_t>(cols.size());
    if (weights[i].dim() == 2 && k != width && k != selected_count(width, topk))
      return fmt::format(
          "resume: the checkpoint's ZenFlow device holds {} of the {} columns of "
          "'{}', which exec.zenflow.topk_ratio {:g} does not give (it chooses {}){}",
          k, width, names[i], topk, selected_count(width, topk), afresh);
    s.columns.push_back(std::move(cols));
  }
  for (const auto& [name, t] : own)
    if (name != kNextSelect && !name.ends_with(kColumns)) s.device_state.emplace_back(name, *t);
  // Taken now, as the saving run holds it: columns, masters gathered,
  // moments; a reselection it would make at the next window start follows
  // there as usual.
  saved_selection = std::move(s);
  StepStats not_a_step;  // what select_columns waits for is no step's
  stats = &not_a_step;
  select_columns();
  stats = nullptr;
  return "";
}

optim::NamedTensors OffloadExecutor::checkpoint_state() const {
  return impl_->zenflow_state();
}

std::string OffloadExecutor::restore_checkpoint_state(const optim::NamedTensors& saved) {
  return impl_->take_zenflow_state(saved);
}

}  // namespace lt::exec
