// `lazytrain convert --model DIR --out DIR [--dtype bf16|f32]`: rewrites a
// Hugging Face folder as lazytrain writes it (config + sharded
// safetensors), and copies the tokenizer files so the result is complete.
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "io/hf_model.h"

namespace lt::cli {

namespace {

struct ConvertArgs {
  std::string model;
  std::string out;
  std::string dtype = "bf16";
  double max_shard_gb = 5.0;
};

// Files a Hugging Face folder carries besides the weights and config.
constexpr const char* kCompanionFiles[] = {
    "tokenizer.json", "tokenizer_config.json",  "special_tokens_map.json", "vocab.json",
    "merges.txt",     "generation_config.json", "chat_template.jinja"};

void run_convert(const ConvertArgs& args) {
  LT_CHECK(args.dtype == "bf16" || args.dtype == "f32" || args.dtype == "f16",
           "--dtype must be bf16, f16 or f32, got '", args.dtype, "'");
  namespace fs = std::filesystem;
  LT_CHECK(fs::weakly_canonical(args.model) != fs::weakly_canonical(args.out),
           "--out must differ from --model (the source would be overwritten while read)");
  const DType dtype = dtype_from_name(args.dtype);
  models::CausalLM model = io::load_hf_model(args.model, DType::F32);
  io::HfWriteOptions options;
  options.max_shard_bytes = static_cast<uint64_t>(args.max_shard_gb * 1e9);
  io::save_hf_model(model, args.out, dtype, options);
  for (const char* name : kCompanionFiles) {
    const fs::path src = fs::path(args.model) / name;
    if (fs::exists(src))
      fs::copy_file(src, fs::path(args.out) / name, fs::copy_options::overwrite_existing);
  }
  fmt::print("wrote {} ({} parameters, {})\n", args.out, model.config().num_parameters(),
             args.dtype);
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  auto* cmd = app.add_subcommand("convert", "Write a Hugging Face model folder in another dtype");
  cmd->add_option("--model", args->model, "Hugging Face model folder to read")->required();
  cmd->add_option("--out", args->out, "Folder to write")->required();
  cmd->add_option("--dtype", args->dtype, "Weights dtype: bf16, f16 or f32")->capture_default_str();
  cmd->add_option("--max-shard-gb", args->max_shard_gb, "Shard size limit (GB, decimal)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->callback([args] { run_convert(*args); });
}

}  // namespace lt::cli
