// implements: RunConfig validation and parsing.
#include "tessera/config/run_config.hpp"


#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/core/new_file.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/io/hub_cache.hpp"

namespace tessera {
namespace {

// Gathers every broken rule so that one run shows the user all fixes at once.
class Problems {
 public:
  explicit Problems(const RunConfig& cfg) : cfg_(cfg) {}

  void require(bool ok, std::string_view key, std::string_view allowed) {
    if (ok) return;
    lines_.push_back(std::string(key) + "=" +
                     format_field_value(cfg_, field_index<RunConfig>(key)) + ": " +
                     std::string(allowed));
  }

  void throw_if_any() const {
    if (lines_.empty()) return;
    std::string message = lines_[0];
    for (std::size_t i = 1; i < lines_.size(); ++i) message += "\n" + lines_[i];
    throw ConfigError(message);
  }

 private:
  const RunConfig& cfg_;
  std::vector<std::string> lines_;
};

bool is_device(std::string_view device) {
  if (device == "auto" || device == "cpu" || device == "cuda") return true;
  constexpr std::string_view kCudaPrefix = "cuda:";
  if (!device.starts_with(kCudaPrefix)) return false;
  const std::string_view index = device.substr(kCudaPrefix.size());
  return !index.empty() && std::all_of(index.begin(), index.end(),
                                       [](char c) { return c >= '0' && c <= '9'; });
}

// error_code overloads: an unreadable path is a config problem to report, not an exception.
bool is_dir(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

bool is_file(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

// The directory an output is created in ("." for a bare name); writable means we may create and rename
// entries there (W_OK also fails on a read-only file system, for root too).
std::filesystem::path parent_of(std::string_view output) {
  const std::filesystem::path parent = normalized_path(std::string(output)).parent_path();
  return parent.empty() ? std::filesystem::path(".") : parent;
}

void require_writable_parent(Problems& p, std::string_view key, std::string_view output) {
  const std::filesystem::path parent = parent_of(output);
  if (!is_dir(parent)) {
    p.require(false, key, "parent directory " + parent.string() + " does not exist; create it first");
  } else if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    p.require(false, key, "cannot write in directory " + parent.string() + " (" + std::strerror(errno) +
                              "); choose a directory you can write to");
  }
}

// The run's inputs an output must not replace or be written into: a file input (data=, tokenizer=) compared by
// identity (resolved path, then device and inode: a hard link too), a directory input by containment, every spelling
// resolved (./x, links, a not yet existing output by its parent's real path).
void require_not_an_input(Problems& p, const RunConfig& cfg, std::string_view key, const std::string& output) {
  const std::filesystem::path out = resolved_path(output);
  const auto same = [&](const std::string& input) {
    return out == resolved_path(input) || same_file(output, input);
  };
  if (!cfg.data.empty() && !is_dir(cfg.data) && same(cfg.data))
    p.require(false, key, "is the data file of this run (data=" + cfg.data + "); it would be overwritten. Choose "
                          "another path");
  if (!cfg.tokenizer.empty() && !is_dir(cfg.tokenizer) && same(cfg.tokenizer))
    p.require(false, key, "is the tokenizer file of this run (tokenizer=" + cfg.tokenizer + "); it would be "
                          "overwritten. Choose another path");
  const std::string resume = cfg.resume == "auto" ? std::string() : cfg.resume;
  for (const auto& [input_key, input] : {std::pair<std::string_view, const std::string&>{"model_dir", cfg.model_dir},
                                         std::pair<std::string_view, const std::string&>{"adapter", cfg.adapter},
                                         std::pair<std::string_view, const std::string&>{"data", cfg.data},
                                         std::pair<std::string_view, const std::string&>{"tokenizer", cfg.tokenizer},
                                         std::pair<std::string_view, const std::string&>{"resume", resume}})
    if (!input.empty() && (input_key == "model_dir" || input_key == "adapter" || is_dir(input)) &&
        is_within(out, input))
      p.require(false, key, "is inside " + std::string(input_key) + "=" + input +
                                ", an input of this run; write outputs elsewhere");
}

// A file a run writes (metrics=, trace=): not a directory or a special file, in a writable directory, not an input,
// not inside save_dir.
void check_output_file(Problems& p, const RunConfig& cfg, const std::string& key, const std::string& path,
                       std::string_view example) {
  if (path.empty()) return;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  const bool names_dir = path.back() == '/' || std::filesystem::is_directory(status);
  if (names_dir) {
    p.require(false, key, "names a directory; give the path of a file, e.g. " + key + "=" + std::string(example));
  } else if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    p.require(false, key,
              "exists and is not a regular file (a device, FIFO or socket); give the path of a file to create "
              "or replace");
  } else {
    require_writable_parent(p, key, path);
  }
  require_not_an_input(p, cfg, key, path);
  if (!cfg.save_dir.empty() && is_within(path, cfg.save_dir))
    p.require(false, key,
              resolved_path(path) == resolved_path(cfg.save_dir)
                  ? "is also save_dir; give the " + key + " file and the saved weights different paths"
                  : "is inside save_dir=" + cfg.save_dir + ", which is written whole at the end; put it elsewhere");
}

// model_dir (io/hub_cache.hpp): a directory, or the id of a model in the Hugging Face hub cache; revision picks the
// hub id's snapshot and is ignored for a directory, as from_pretrained ignores it. Returns the directory the run
// reads, for the checks that keep outputs out of the run's inputs.
std::string check_model_dir(Problems& p, const RunConfig& cfg) {
  p.require(!cfg.revision.empty(), "revision", "must name a branch, tag or commit hash, e.g. revision=main");
  p.require(!cfg.model_dir.empty() || cfg.revision == "main" || cfg.revision.empty(), "revision",
            "picks a revision of model_dir as a Hugging Face hub id, and model_dir is empty (the model preset); "
            "give model_dir=ORG/NAME, or drop revision");
  if (cfg.model_dir.empty() || is_dir(cfg.model_dir)) return cfg.model_dir;
  if (!io::looks_like_repo_id(cfg.model_dir)) {
    p.require(false, "model_dir",
              "not an existing directory, nor a Hugging Face hub id (ORG/NAME, e.g. openlm-research/open_llama_7b); "
              "give a Hugging Face model dir with config.json, the hub id of a model in the hub cache, or leave it "
              "empty to use the model preset");
    return cfg.model_dir;
  }
  if (cfg.revision.empty()) return cfg.model_dir;
  try {
    return io::resolve_hub_snapshot(cfg.model_dir, cfg.revision).string();
  } catch (const ConfigError& e) {
    p.require(false, "model_dir", "not an existing directory; " + std::string(e.what()));
    return cfg.model_dir;
  }
}

// checkpoint_dir, checkpoint_every, keep_last, resume (engine/train_state.hpp).
void check_checkpoint_keys(Problems& p, const RunConfig& cfg) {
  p.require(cfg.checkpoint_every >= 0, "checkpoint_every", "must be >= 0 (0 = only at the end and on SIGTERM/SIGUSR1)");
  p.require(cfg.keep_last >= 0, "keep_last", "must be >= 0 (0 = keep every checkpoint)");
  if (cfg.checkpoint_dir.empty()) {
    p.require(cfg.checkpoint_every == 0, "checkpoint_every",
              "needs checkpoint_dir, the directory to write checkpoints to; e.g. checkpoint_dir=ckpt");
    p.require(cfg.keep_last == 0, "keep_last", "needs checkpoint_dir; e.g. checkpoint_dir=ckpt");
    p.require(cfg.resume != "auto", "resume",
              "auto resumes from checkpoint_dir's newest checkpoint and needs checkpoint_dir; e.g. checkpoint_dir=ckpt "
              "resume=auto");
  } else {
    const std::filesystem::path dir = normalized_path(cfg.checkpoint_dir);
    const std::string name = dir.filename().string();
    std::error_code ec;
    if (dir == dir.root_path() || name == "." || name == "..")
      p.require(false, "checkpoint_dir", "names the root, the working directory or its parent; give a directory of "
                                         "its own, e.g. checkpoint_dir=ckpt");
    else if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
      p.require(false, "checkpoint_dir", "exists and is not a directory; give a directory, e.g. checkpoint_dir=ckpt");
    else if (!std::filesystem::exists(dir, ec))
      require_writable_parent(p, "checkpoint_dir", cfg.checkpoint_dir);
    require_not_an_input(p, cfg, "checkpoint_dir", cfg.checkpoint_dir);
    if (!cfg.save_dir.empty() && (is_within(cfg.checkpoint_dir, cfg.save_dir) || is_within(cfg.save_dir, cfg.checkpoint_dir)))
      p.require(false, "checkpoint_dir", "overlaps save_dir=" + cfg.save_dir + "; give the checkpoints and the final "
                                         "weights separate directories");
    for (const auto& [key, file] : {std::pair<std::string_view, const std::string&>{"metrics", cfg.metrics},
                                    std::pair<std::string_view, const std::string&>{"trace", cfg.trace}})
      if (!file.empty() && is_within(file, cfg.checkpoint_dir))
        p.require(false, std::string(key), "is inside checkpoint_dir=" + cfg.checkpoint_dir +
                                               ", whose old checkpoints are deleted (keep_last); put it elsewhere");
  }
  if (!cfg.resume.empty() && cfg.resume != "auto")
    p.require(is_file(std::filesystem::path(cfg.resume) / "manifest.json"), "resume",
              is_dir(cfg.resume) ? "has no manifest.json: not a complete tessera checkpoint (a write that was cut short "
                                   "leaves none); give a checkpoint_dir/step-N dir, or resume=auto"
                                 : "not an existing directory; give a checkpoint_dir/step-N dir, or resume=auto");
  p.require(std::isfinite(cfg.collective_timeout_s) && cfg.collective_timeout_s >= 0 &&
                cfg.collective_timeout_s <= 1e7,
            "collective_timeout_s", "must be a number of seconds from 0 (wait forever) to 10,000,000, e.g. 600");
}

void check_outputs(Problems& p, const RunConfig& cfg) {
  check_output_file(p, cfg, "metrics", cfg.metrics, "run.jsonl");
  check_output_file(p, cfg, "trace", cfg.trace, "run.trace.json");
  if (!cfg.metrics.empty() && !cfg.trace.empty() &&
      (resolved_path(cfg.metrics) == resolved_path(cfg.trace) || same_file(cfg.metrics, cfg.trace)))
    p.require(false, "trace", "is also metrics=" + cfg.metrics + "; give the trace and the metrics different files");
  if (!cfg.save_dir.empty()) {
    const std::filesystem::path dir = normalized_path(cfg.save_dir);
    const std::string name = dir.filename().string();
    if (dir == dir.root_path() || name == "." || name == "..") {
      p.require(false, "save_dir", "names the root, the working directory or its parent; give a new directory, e.g. "
                                   "save_dir=out");
      return;
    }
    require_writable_parent(p, "save_dir", cfg.save_dir);
    std::error_code ec;
    const bool occupied = std::filesystem::exists(dir, ec) &&
                          (!std::filesystem::is_directory(dir, ec) || !std::filesystem::is_empty(dir, ec));
    p.require(!occupied, "save_dir",
              "exists and is not an empty directory; choose a new directory (saved weights are never overwritten)");
    require_not_an_input(p, cfg, "save_dir", cfg.save_dir);
  }
  check_checkpoint_keys(p, cfg);
}

// "must be <= N (why)": every numeric key has an upper bound (config/run_config.hpp, limits).
template <class N>
void require_at_most(Problems& p, std::string_view key, N value, N limit, std::string_view why) {
  std::string bound = std::is_integral_v<N> ? std::to_string(limit) : detail::format_value(static_cast<double>(limit));
  p.require(!(value > limit), key, "must be at most " + bound + " (" + std::string(why) + ")");
}

void check_upper_bounds(Problems& p, const RunConfig& cfg) {
  require_at_most(p, "seq_len", cfg.seq_len, limits::seq_len, "8x the longest context of any supported model");
  require_at_most(p, "batch_size", cfg.batch_size, limits::batch_size, "rows per rank per micro-step");
  require_at_most(p, "accumulate_grad_batches", cfg.accumulate_grad_batches, limits::accumulate_grad_batches,
                  "micro-steps per optimizer step");
  require_at_most(p, "global_batch_size", cfg.global_batch_size, limits::global_batch_size,
                  "rows per optimizer step over all ranks");
  require_at_most(p, "max_epochs", cfg.max_epochs, limits::max_epochs, "set max_steps for a run bounded by steps");
  require_at_most(p, "max_steps", cfg.max_steps, limits::max_steps, "steps x tokens per step must fit 64 bits");
  require_at_most(p, "num_train_samples", cfg.num_train_samples, limits::num_train_samples,
                  "far more rows than any token file holds; -1 uses all of the data");
  require_at_most(p, "shard_group_size", cfg.shard_group_size, limits::shard_group_size, "ranks per shard group");
  require_at_most(p, "lora_r", cfg.lora_r, limits::lora_r, "wider than every linear layer of the supported models");
  require_at_most(p, "bucket_cap_mb", cfg.bucket_cap_mb, limits::bucket_cap_mb, "1 TiB, more than any device holds");
  require_at_most(p, "threads", cfg.threads, limits::threads, "threads per rank; 0 = the node's cores shared among ranks");
}

}  // namespace

std::optional<std::int64_t> parse_bytes(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  double value = 0;
  try {
    std::size_t used = 0;
    value = std::stod(std::string(text.substr(0, i)), &used);
    if (used != i) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  constexpr std::pair<std::string_view, double> units[] = {
      {"B", 1.0},          {"KB", 1e3},          {"MB", 1e6},          {"GB", 1e9},          {"TB", 1e12},
      {"KiB", 1024.0},     {"MiB", 1048576.0},   {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  for (const auto& [name, scale] : units)
    if (text.substr(i) == name) {
      const double bytes = value * scale;
      if (!(bytes >= 1 && bytes < 9e18)) return std::nullopt;
      return static_cast<std::int64_t>(bytes);
    }
  return std::nullopt;
}

void validate(const RunConfig& cfg) {
  Problems p(cfg);
  p.require(std::isfinite(cfg.lr) && cfg.lr > 0, "lr", "must be a finite number > 0, e.g. lr=3e-4");
  p.require(std::isfinite(cfg.bucket_cap_mb) && cfg.bucket_cap_mb > 0, "bucket_cap_mb",
            "must be a number of MiB > 0, e.g. bucket_cap_mb=25");
  p.require(cfg.shard_group_size >= 0, "shard_group_size",
            "must be >= 0 (0 = the ranks of one node; otherwise a divisor of the number of ranks)");
  p.require(cfg.wrap_blocks.find_first_not_of(", ") != std::string::npos, "wrap_blocks",
            "must be all, none, or name block types or modules, e.g. wrap_blocks=LlamaDecoderLayer");
  p.require(cfg.checkpoint_blocks.find_first_not_of(", ") != std::string::npos, "checkpoint_blocks",
            "must be all or name block types, e.g. checkpoint_blocks=OPTDecoderLayer");
  p.require(cfg.freeze.find_first_not_of(", ") != std::string::npos, "freeze",
            "must be none or name modules, e.g. freeze=vision_model,language_model");
  p.require(cfg.lora_r >= 1, "lora_r", "must be >= 1 (the adapter rank), e.g. lora_r=16");
  p.require(std::isfinite(cfg.lora_alpha) && cfg.lora_alpha > 0, "lora_alpha", "must be a number > 0, e.g. lora_alpha=32");
  p.require(cfg.lora_dropout >= 0 && cfg.lora_dropout < 1, "lora_dropout", "must be in [0, 1), e.g. lora_dropout=0.05");
  p.require(cfg.lora_targets.find_first_not_of(", ") != std::string::npos, "lora_targets",
            "must name at least one module, e.g. lora_targets=q_proj,v_proj");
  p.require(cfg.adapter.empty() || is_file(std::filesystem::path(cfg.adapter) / "adapter_config.json"), "adapter",
            "not a PEFT adapter dir (no adapter_config.json in it); give a dir written by PEFT's save_pretrained or "
            "by a tessera Lora run's save_dir, or leave it empty for fresh adapters");
  p.require(cfg.batch_size >= 1, "batch_size", "must be >= 1 (rows per rank per micro-step)");
  p.require(cfg.accumulate_grad_batches >= 1, "accumulate_grad_batches",
            "must be >= 1 (1 = an optimizer step after every micro-step)");
  p.require(cfg.global_batch_size >= 0, "global_batch_size",
            "must be >= 0 (0 = use accumulate_grad_batches; otherwise rows per optimizer step over all ranks)");
  p.require(cfg.global_batch_size == 0 || cfg.accumulate_grad_batches == 1, "accumulate_grad_batches",
            "is set by global_batch_size=" + std::to_string(cfg.global_batch_size) +
                " (global / (batch_size x ranks)); give one of the two");
  p.require(std::isfinite(cfg.beta1) && cfg.beta1 >= 0 && cfg.beta1 < 1, "beta1", "must be in [0, 1), e.g. beta1=0.9");
  p.require(std::isfinite(cfg.beta2) && cfg.beta2 >= 0 && cfg.beta2 < 1, "beta2", "must be in [0, 1), e.g. beta2=0.95");
  p.require(cfg.max_epochs >= 1 || cfg.max_steps > 0, "max_epochs",
            "must be >= 1, or set max_steps >= 1 to bound the run by steps instead");
  p.require(cfg.max_steps == -1 || cfg.max_steps >= 1, "max_steps",
            "must be -1 (run max_epochs) or >= 1");
  p.require(cfg.num_train_samples == -1 || cfg.num_train_samples >= 1, "num_train_samples",
            "must be -1 (all of the data) or >= 1");
  p.require(cfg.shuffle_seed >= -1, "shuffle_seed",
            "must be -1 (the table's order) or a seed >= 0, as Dataset.shuffle(seed=N) takes");
  p.require(cfg.val_split_fraction >= 0 && cfg.val_split_fraction < 1, "val_split_fraction",
            "must be in [0, 1): the fraction held out, e.g. val_split_fraction=0.05 as litgpt's Alpaca2k (0 = none)");
  p.require(cfg.max_length == -1 || cfg.max_length >= 1, "max_length",
            "must be -1 (truncate text captions at seq_len) or >= 1, e.g. max_length=50 as the labs' processor");
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"split", &cfg.split},
                                   {"image_column", &cfg.image_column}, {"text_column", &cfg.text_column},
                                   {"label_column", &cfg.label_column}}) {
    p.require(!value->empty(), key, "must name a split or column; the default is " +
                                         std::string(std::string_view(key) == "split" ? "train" : "its name"));
  }
  // Written so that NaN fails too.
  p.require(cfg.limit_train_batches > 0 && cfg.limit_train_batches <= 1, "limit_train_batches",
            "must be in (0, 1], the fraction of each epoch's batches to run");
  p.require(cfg.seq_len >= 2, "seq_len",
            "must be >= 2 (each row needs at least one input token and its next-token target)");
  p.require(!cfg.weight_decay || (std::isfinite(*cfg.weight_decay) && *cfg.weight_decay >= 0),
            "weight_decay", "must be a finite number >= 0, or none for the optimizer's default");
  p.require(is_device(cfg.device), "device",
            "must be auto, cpu, cuda or cuda:N with N a GPU index, e.g. cuda:0");
  p.require(cfg.threads >= 0, "threads", "must be >= 0 (0 = the node's cores shared among its ranks)");
  p.require(cfg.log_every >= 1, "log_every", "must be >= 1 (print a step line every N steps)");
  p.require(std::isfinite(cfg.peak_tflops) && cfg.peak_tflops >= 0 && cfg.peak_tflops <= 1e6, "peak_tflops",
            "must be a finite number from 0 (the device's own peak, when tessera knows it) to 1,000,000");
  p.require(cfg.device_memory.empty() || parse_bytes(cfg.device_memory), "device_memory",
            "must be a size with a unit, e.g. device_memory=80GiB or 40GB (empty = this machine's device)");
  p.require(cfg.max_memory.empty() || parse_bytes(cfg.max_memory), "max_memory",
            "must be a size with a unit, e.g. max_memory=2GiB (empty = no limit)");
  p.require(cfg.predict_mfu > 0 && cfg.predict_mfu <= 1, "predict_mfu",
            "must be in (0, 1], e.g. predict_mfu=0.4");
  p.require(std::isfinite(cfg.link_gb_s) && cfg.link_gb_s > 0 && cfg.link_gb_s <= 1e6, "link_gb_s",
            "must be a finite number of GB/s > 0, e.g. link_gb_s=450 for NVLink");
  p.require(cfg.peak_holders >= 0 && cfg.peak_holders <= limits::peak_holders, "peak_holders",
            "must be from 0 (none) to " + std::to_string(limits::peak_holders) +
                " (the largest holders of the predicted peak --dry-run lists)");
  p.require(cfg.memory_every >= 1, "memory_every",
            "must be >= 1 (memory snapshots at steps 0, 1 and every N)");
  p.require(!cfg.model_dir.empty() || !cfg.model.empty(), "model",
            "empty; name one of the model family's presets (--help lists them), or set model_dir to a Hugging "
            "Face model dir");
  RunConfig read = cfg;  // the inputs as the run reads them: model_dir a hub id's snapshot directory
  read.model_dir = check_model_dir(p, cfg);
  p.require(cfg.data.empty() || is_file(cfg.data) || is_dir(cfg.data), "data",
            "not an existing file or directory; give a token file (nanoGPT uint16 or llm.c .bin) for a language "
            "model, a directory with pairs.jsonl for T5, an image directory (labels.jsonl or a directory per class) "
            "for an image model, a datasets directory or Parquet for any family, or leave it empty for synthetic "
            "data");
  p.require(cfg.tokenizer.empty() || is_file(cfg.tokenizer) || is_dir(cfg.tokenizer), "tokenizer",
            "not an existing file or directory; give a model dir with its tokenizer files, or a tokenizer.model, "
            "tokenizer.json or vocab.json");
  check_upper_bounds(p, cfg);
  check_outputs(p, read);
  p.throw_if_any();
}

RunConfig parse_run_config(std::span<const std::string_view> args, const RunConfig& defaults) {
  // The seeds' own names of tessera's keys, rewritten before parsing (so giving both is "given twice").
  constexpr std::pair<std::string_view, std::string_view> aliases[] = {{"batch_size_per_device", "batch_size"}};
  std::vector<std::string> rewritten;
  rewritten.reserve(args.size());
  for (const std::string_view arg : args) {
    std::string a(arg);
    for (const auto& [seed_key, key] : aliases)
      if (arg.starts_with(seed_key) && arg.size() > seed_key.size() && arg[seed_key.size()] == '=')
        a = std::string(key) + std::string(arg.substr(seed_key.size()));
    rewritten.push_back(std::move(a));
  }
  const std::vector<std::string_view> views(rewritten.begin(), rewritten.end());
  RunConfig cfg = parse_args(std::span<const std::string_view>(views), defaults);
  validate(cfg);
  // Resolved here, once, so that every reader of model_dir (config.json, weights, tokenizer, image processor) sees
  // a directory.
  cfg.model_dir = io::resolve_model_dir(cfg.model_dir, cfg.revision).string();
  return cfg;
}

RunConfig with_global_batch(RunConfig cfg, std::int64_t ranks) {
  if (cfg.global_batch_size <= 0) return cfg;
  const std::int64_t per_micro_step = cfg.batch_size * ranks;
  if (cfg.global_batch_size % per_micro_step != 0)
    throw ConfigError("global_batch_size=" + std::to_string(cfg.global_batch_size) + ": not a multiple of batch_size (" +
                      std::to_string(cfg.batch_size) + ") x ranks (" + std::to_string(ranks) + ") = " +
                      std::to_string(per_micro_step) + " rows per micro-step; choose a multiple of it (e.g. " +
                      std::to_string(per_micro_step * std::max<std::int64_t>(1, cfg.global_batch_size / per_micro_step)) +
                      "), or change batch_size or the number of ranks");
  cfg.accumulate_grad_batches = cfg.global_batch_size / per_micro_step;
  return cfg;
}

bool wants_help(std::span<const std::string_view> args) {
  return std::any_of(args.begin(), args.end(),
                     [](std::string_view arg) { return arg == "--help" || arg == "-h"; });
}

// The field functions' one instantiation for RunConfig (run_config.hpp declares them extern).
template std::size_t field_index<RunConfig>(std::string_view key);
template void set_field<RunConfig>(RunConfig& cfg, std::string_view key, std::string_view value);
template std::string format_field_value<RunConfig>(const RunConfig& cfg, std::size_t index);
template std::string config_table<RunConfig>(const RunConfig& cfg,
                                             std::span<const std::pair<std::string, std::string>> extra);
template std::string config_help<RunConfig>(const RunConfig& defaults);
template RunConfig parse_args<RunConfig>(std::span<const std::string_view> args, RunConfig defaults);

}  // namespace tessera
