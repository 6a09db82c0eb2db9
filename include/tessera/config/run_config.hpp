#pragma once
// defines: tessera::RunConfig, the settings of one training run, set by key=value arguments,
// printed as a table at start and checked by validate() before anything is loaded.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tessera/config/fields.hpp"

namespace tessera {

// lr_scaling: none keeps lr; linear multiplies it by the number of ranks (their batches add up to one step).
enum class LrScaling { none, linear };
template <>
struct config_enum<LrScaling> {
  static constexpr std::array<std::pair<LrScaling, std::string_view>, 2> values{
      {{LrScaling::none, "none"}, {LrScaling::linear, "linear"}}};
};

// memory_ranks: the memory lines of a job of several ranks: max = one line, each figure the largest over the ranks
// (with the rank it is on); all = a line per rank as well (seed 001's lab prints each rank's Allocated/Reserved).
enum class MemoryRanks { max, all };
template <>
struct config_enum<MemoryRanks> {
  static constexpr std::array<std::pair<MemoryRanks, std::string_view>, 2> values{
      {{MemoryRanks::max, "max"}, {MemoryRanks::all, "all"}}};
};

// memory_micro: under gradient accumulation, which micro-steps print their phases: first = micro-step 0 (and the
// step's optimizer phase); all = every micro-step (seed 002's "more output lines per step").
enum class MemoryMicro { first, all };
template <>
struct config_enum<MemoryMicro> {
  static constexpr std::array<std::pair<MemoryMicro, std::string_view>, 2> values{
      {{MemoryMicro::first, "first"}, {MemoryMicro::all, "all"}}};
};

// reduce_dtype: the dtype gradients are averaged across ranks in; param = the gradients' own dtype (the parameter
// dtype, as torch DDP reduces), with no copy; auto = param, except under ShardGradOp/FullShard/HybridShard with a
// compute dtype other than the parameters' (Bf16Mixed, Fp16Mixed): the compute dtype, as FSDP's MixedPrecision does
// (Lightning's and accelerate's bf16-mixed, FSDP2's default reduce_dtype).
enum class ReduceDtype { auto_, param, fp32, bf16, fp16 };
template <>
struct config_enum<ReduceDtype> {
  static constexpr std::array<std::pair<ReduceDtype, std::string_view>, 5> values{{{ReduceDtype::auto_, "auto"},
                                                                                    {ReduceDtype::param, "param"},
                                                                                    {ReduceDtype::fp32, "fp32"},
                                                                                    {ReduceDtype::bf16, "bf16"},
                                                                                    {ReduceDtype::fp16, "fp16"}}};
};

// cpu_lowp: how bf16/fp16 matrix products run on the CPU: LibTorch's 16-bit kernels (native), or widened to fp32 and
// rounded once (widen: ops/gemm.hpp); auto picks native where the CPU has 16-bit instructions (ops/cpu_lowp.hpp).
enum class CpuLowp { auto_, native, widen };
template <>
struct config_enum<CpuLowp> {
  static constexpr std::array<std::pair<CpuLowp, std::string_view>, 3> values{
      {{CpuLowp::auto_, "auto"}, {CpuLowp::native, "native"}, {CpuLowp::widen, "widen"}}};
};

// loss_blocks: the language-model heads' loss over blocks of the vocabulary (ops/loss.hpp: the full fp32 logits
// never exist, one more product of the head in backward) or whole; auto = in blocks where the run's device (a dry
// run's: its target) is a GPU, whose memory bounds a run, whole on a CPU, where the extra product costs time.
enum class LossBlocks { auto_, on, off };
template <>
struct config_enum<LossBlocks> {
  static constexpr std::array<std::pair<LossBlocks, std::string_view>, 3> values{
      {{LossBlocks::auto_, "auto"}, {LossBlocks::on, "on"}, {LossBlocks::off, "off"}}};
};

// tf32: whether fp32 matrix products and convolutions on a CUDA GPU may run as TF32 (10-bit mantissa products, fp32
// accumulation): default = torch's defaults, which the labs' 32-true runs have (matmuls in IEEE fp32, cuDNN
// convolutions in TF32); on = both in TF32 (torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32, what
// Lightning's set_float32_matmul_precision("high") gives the matmuls); off = both in IEEE fp32, as a CPU computes.
// No effect on 16-bit products or on a CPU.
enum class Tf32 { default_, on, off };
template <>
struct config_enum<Tf32> {
  static constexpr std::array<std::pair<Tf32, std::string_view>, 3> values{
      {{Tf32::default_, "default"}, {Tf32::on, "on"}, {Tf32::off, "off"}}};
};

// data_order: the order of an epoch's rows: fixed (the data's order, the same on every world size), or as the labs'
// loaders shuffle it: DataLoader(shuffle=True) with a generator seeded `seed` on one rank, torch's
// DistributedSampler(shuffle=True, seed=seed) with set_epoch on several (data/lab_order.hpp).
enum class DataOrder { fixed, dataloader };
template <>
struct config_enum<DataOrder> {
  static constexpr std::array<std::pair<DataOrder, std::string_view>, 2> values{
      {{DataOrder::fixed, "fixed"}, {DataOrder::dataloader, "dataloader"}}};
};

// caption_targets: what an image-to-text model's loss is over when the captions are text: the caption's tokens
// (labels = the tokenizer's ids, as the labs pass them; the image conditions them) or, as Blip2Processor's input_ids
// used as labels give, the query positions' image tokens too.
enum class CaptionTargets { caption, processor };
template <>
struct config_enum<CaptionTargets> {
  static constexpr std::array<std::pair<CaptionTargets, std::string_view>, 2> values{
      {{CaptionTargets::caption, "caption"}, {CaptionTargets::processor, "processor"}}};
};

// Field order is the order of --help and of the printed table; keep config_fields below in step.
struct RunConfig {
  std::string model = "tiny";
  std::string model_dir;
  std::string revision = "main";
  std::string data;
  std::string split = "train";
  std::string image_column = "image";
  std::string text_column = "text";
  std::string label_column = "label";
  std::int64_t shuffle_seed = -1;
  double val_split_fraction = 0.0;
  DataOrder data_order = DataOrder::fixed;
  std::int64_t max_length = -1;
  CaptionTargets caption_targets = CaptionTargets::caption;
  std::string tokenizer;
  bool mask_prompt = false;
  std::int64_t seq_len = 256;
  double lr = 1e-3;
  LrScaling lr_scaling = LrScaling::none;
  std::int64_t batch_size = 8;
  std::int64_t accumulate_grad_batches = 1;
  std::int64_t global_batch_size = 0;
  std::int64_t max_epochs = 1;
  std::int64_t max_steps = -1;
  std::int64_t num_train_samples = -1;
  double limit_train_batches = 1.0;
  std::int64_t seed = 42;
  std::optional<double> weight_decay;
  double beta1 = 0.9;
  double beta2 = 0.999;
  bool optimizer_in_backward = false;
  std::string metrics;
  std::string trace;
  std::string save_dir;
  std::string checkpoint_dir;
  std::int64_t checkpoint_every = 0;
  std::int64_t keep_last = 0;
  std::string resume;
  double collective_timeout_s = 600.0;
  double bucket_cap_mb = 25.0;
  std::int64_t shard_group_size = 0;
  ReduceDtype reduce_dtype = ReduceDtype::auto_;
  std::string wrap_blocks = "all";
  std::int64_t lora_r = 16;
  double lora_alpha = 32.0;
  double lora_dropout = 0.05;
  std::string lora_targets = "auto";  // the family's default (models::default_lora_targets)
  std::string adapter;
  bool merge_adapter = false;
  std::string checkpoint_blocks = "all";
  std::string freeze = "none";
  std::string device = "auto";
  std::int64_t threads = 0;
  CpuLowp cpu_lowp = CpuLowp::auto_;
  LossBlocks loss_blocks = LossBlocks::auto_;
  Tf32 tf32 = Tf32::default_;
  std::int64_t log_every = 1;
  std::int64_t memory_every = 50;
  MemoryRanks memory_ranks = MemoryRanks::max;
  MemoryMicro memory_micro = MemoryMicro::first;
  double peak_tflops = 0.0;
  bool predict = true;
  std::int64_t peak_holders = 0;
  std::string device_memory;
  double predict_mfu = 0.4;
  double link_gb_s = 100.0;
  std::string max_memory;
};

// A byte count as the memory keys take it: a number and a unit, B, KB/MB/GB/TB (powers of 1000) or
// KiB/MiB/GiB/TiB (powers of 1024), e.g. 80GiB, 40GB, 512MiB; nullopt when `text` is not one or not > 0.
std::optional<std::int64_t> parse_bytes(std::string_view text);

template <>
struct config_fields<RunConfig> {
  static constexpr std::string_view title = "run config";
  static constexpr std::array<FieldDoc, 66> docs{{
      {"model",
       "model preset of the experiment's model family (--help lists them, e.g. tiny); ignored when model_dir "
       "is set"},
      {"model_dir",
       "Hugging Face model dir of the experiment's family (config.json + model.safetensors or its .index.json), or "
       "a hub id (ORG/NAME, e.g. openlm-research/open_llama_7b) already in the Hugging Face hub cache, read offline "
       "as from_pretrained(id, local_files_only=True) does; empty = build the model preset"},
      {"revision",
       "model_dir as a hub id: the branch, tag or commit hash to read from the hub cache (refs/REVISION gives the "
       "commit; a 40-hex commit hash is used as it is); not used when model_dir is a directory"},
      {"data", "language models: a token file (nanoGPT uint16 .bin or llm.c headered .bin), or text (.txt: a document "
               "per line; .jsonl / .json: {\"text\"} documents or Alpaca-style {\"instruction\", \"input\", "
               "\"output\"} records), tokenized once into a cache beside it; T5: a directory with "
               "pairs.jsonl; BLIP-2: a directory with captions.jsonl and its images; image models: a directory of images (labels.jsonl, or one directory per class); empty = "
               "synthetic data of the family's kind; or, for every family, a Hugging Face datasets directory "
               "(save_to_disk, a DatasetDict, load_dataset's cache) or Parquet files (data/table_source.hpp)"},
      {"split", "data= a DatasetDict or a directory of split-named files: the split to train on (train, validation, "
                "...)"},
      {"image_column", "data= a datasets directory or Parquet: the column of the images (Image feature or bytes)"},
      {"text_column", "data= a datasets directory or Parquet: the column of the text (captions, documents)"},
      {"label_column", "data= a datasets directory or Parquet: the column of the integer class labels (image models)"},
      {"shuffle_seed",
       "data= a datasets directory or Parquet: shuffle its rows as Dataset.shuffle(seed=N) does before "
       "num_train_samples takes the first rows (.select(range(N))); -1 = the table's order"},
      {"val_split_fraction",
       "data= a datasets directory or Parquet: hold out this fraction as train_test_split(test_size=F, seed=seed) "
       "does and train on the rest, in its order (litgpt's Alpaca2k: 0.05); 0 = train on every row"},
      {"data_order",
       "fixed (the data's order, the same on every world size) or dataloader (each epoch shuffled as "
       "DataLoader(shuffle=True) with a generator seeded seed; on several ranks torch's DistributedSampler"
       "(shuffle=True, seed=seed) with set_epoch)"},
      {"max_length",
       "text captions: truncate each to this many tokens, special tokens included, as the processor's "
       "tokenizer(truncation=True, max_length=N); -1 = seq_len"},
      {"caption_targets",
       "image-to-text models on text captions: caption (the loss over the caption's tokens, labels=the tokenizer's "
       "ids, as the labs pass them) or processor (the query positions' image tokens too, as Blip2Processor's "
       "input_ids used as labels)"},
      {"tokenizer",
       "language models with text data (data= .txt, .jsonl or .json): the tokenizer, a model dir or a tokenizer file "
       "(tokenizer.model, tokenizer.json, vocab.json); empty = model_dir's"},
      {"mask_prompt",
       "instruction data (Alpaca-style): true = the prompt's tokens are left out of the loss, as litgpt's "
       "mask_prompt (its Alpaca default: false)"},
      {"seq_len", "tokens per training row (context length), >= 2"},
      {"lr", "learning rate, > 0 (before lr_scaling)"},
      {"lr_scaling", "none, or linear: multiply lr by the number of ranks (the batch grows with them)"},
      {"batch_size", "rows of seq_len tokens per rank per micro-step (the seeds' batch_size_per_device is the same key)"},
      {"accumulate_grad_batches", "micro-steps whose gradients add up to one optimizer step"},
      {"global_batch_size",
       "rows per optimizer step over all ranks; > 0 sets accumulate_grad_batches to global_batch_size / (batch_size "
       "x ranks), which must divide; 0 = use accumulate_grad_batches"},
      {"max_epochs", "passes over the training data (>= 1 unless max_steps > 0)"},
      {"max_steps", "optimizer steps to run; -1 = run max_epochs"},
      {"num_train_samples",
       "rows of seq_len tokens to use per epoch; -1 = all of the data (synthetic data has 512 rows)"},
      {"limit_train_batches", "fraction in (0, 1] of each epoch's batches to run, as Lightning"},
      {"seed", "random seed for weight init and synthetic tokens (the data order is fixed: see docs/config.md)"},
      {"weight_decay", "weight decay coefficient; none = the optimizer's default (AdamW 0.01, SGD 0)"},
      {"beta1", "AdamW/Adam8bit: decay of the first moment, in [0, 1) (torch's default 0.9)"},
      {"beta2", "AdamW/Adam8bit: decay of the second moment, in [0, 1) (torch's default 0.999; litgpt's 0.95)"},
      {"optimizer_in_backward",
       "true = update each unit as soon as its gradient is final during the last micro-step's backward, and free "
       "that gradient then (the same numbers; gradients never all exist at once); not with fp16 loss scaling or an "
       "offload policy"},
      {"metrics", "JSONL file to write per-step metrics to; empty = no metrics file"},
      {"trace",
       "Chrome trace (JSON, opens in Perfetto) to write: one lane per rank with each step, micro-step, unit's "
       "forward and backward, collective (with bytes), optimizer step and offload copy; on CUDA each event "
       "synchronizes the device, so a traced run is slower; empty = no trace"},
      {"save_dir", "dir to write the final weights to as a Hugging Face dir; empty = do not save"},
      {"checkpoint_dir",
       "dir of resumable training-state checkpoints (step-N/: every rank's shard of the parameters, optimizer state "
       "and loss scale, and a manifest; docs/checkpoints.md); with it set, SIGTERM or SIGUSR1 checkpoints at the "
       "next step boundary and ends the run with exit 0, and the run's last step is checkpointed; empty = none"},
      {"checkpoint_every", "checkpoint_dir: write a checkpoint every N optimizer steps; 0 = only at the end and on "
                           "SIGTERM/SIGUSR1"},
      {"keep_last", "checkpoint_dir: keep the newest K checkpoints and delete older ones; 0 = keep all"},
      {"resume",
       "a checkpoint dir (checkpoint_dir/step-N) to continue from, or auto: the newest complete checkpoint in "
       "checkpoint_dir (none yet: start at step 0); resharded when the number of ranks differs; empty = start anew"},
      {"collective_timeout_s",
       "runs of several ranks: a collective that has not completed after this many seconds ends the job on every "
       "rank, naming the rank, the collective and the step (a stuck or lost rank); 0 = wait forever"},
      {"bucket_cap_mb", "Ddp/Zero1: MiB of gradients per all-reduce bucket, > 0"},
      {"shard_group_size",
       "HybridShard: ranks per shard group, dividing the number of ranks; 0 = the ranks of one node"},
      {"reduce_dtype", "dtype gradients are averaged across ranks in: auto (param, but the compute dtype under "
                       "ShardGradOp/FullShard/HybridShard with mixed precision, as FSDP's MixedPrecision), param "
                       "(theirs: the parameter dtype, as torch DDP; no copy), fp32, bf16 or fp16 (a copy of each "
                       "gradient bucket or unit)"},
      {"wrap_blocks",
       "ShardGradOp/FullShard/HybridShard: the FSDP units, as Lightning's auto_wrap_policy: comma-separated block "
       "types (e.g. LlamaDecoderLayer) or module names (by suffix, e.g. embed_tokens) that each become a unit; "
       "all = every block type of the family; none = no unit but the root. Everything not wrapped is the root unit, "
       "gathered from its first call until the end of backward"},
      {"lora_r", "Lora/QLora: adapter rank r >= 1 (with adapter=DIR its adapter_config.json sets r, lora_alpha and "
                 "the targets; lora_r, lora_alpha, lora_targets may then only repeat them)"},
      {"lora_alpha", "Lora/QLora: adapter scaling numerator, > 0; the adapter path is scaled by lora_alpha / lora_r"},
      {"lora_dropout", "Lora/QLora: dropout probability in [0, 1) on the adapter path's input"},
      {"lora_targets",
       "Lora/QLora: comma-separated linear modules to adapt, by name suffix as PEFT's target_modules (Llama: q_proj, "
       "k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj; OPT: q_proj, k_proj, v_proj, out_proj, fc1, fc2; T5: "
       "q, k, v, o, wi_0, wi_1, wo; ViT: query, key, value, dense); auto = PEFT's default for the family (q_proj,v_proj; "
       "T5 q,v; ViT query,value; BLIP-2 its language model's)"},
      {"adapter", "Lora/QLora: PEFT adapter dir to start from (adapter_config.json + adapter_model.safetensors)"},
      {"merge_adapter",
       "Lora/QLora: true = save_dir gets the base with the adapters merged in (a Hugging Face model dir); "
       "false = save_dir gets the adapters as a PEFT dir"},
      {"checkpoint_blocks",
       "CheckpointEveryNth: the block types the policy counts and checkpoints (comma-separated, e.g. "
       "Blip2QFormerLayer,OPTDecoderLayer), as Lightning's activation_checkpointing_policy; all = every block type"},
      {"freeze",
       "parts of the model never trained (no gradients, no optimizer state), as requires_grad_(False) on a "
       "sub-module: comma-separated module paths, each freezing every unit under it (BLIP-2: vision_model, qformer, "
       "query_tokens, language_projection, language_model); none = train everything"},
      {"device", "auto (cuda if available, else cpu), cpu, cuda or cuda:N (N = GPU index)"},
      {"threads", "CPU threads for intra-op parallelism per rank; 0 = the node's cores shared among its ranks"},
      {"cpu_lowp",
       "CPU runs in bf16/fp16: how their matrix products run; native = LibTorch's 16-bit kernels (fast on CPUs with "
       "avx512_bf16/amx_bf16, resp. avx512_fp16/amx_fp16; 40-130x slower than fp32 elsewhere); widen = each product "
       "in fp32 on the 16-bit values, rounded once (the same numbers up to summation order, at fp32 speed); auto = "
       "native where the CPU has the instructions, else widen"},
      {"loss_blocks",
       "language models (Llama, OPT, T5, BLIP-2): on = the head's product and cross-entropy over blocks of the "
       "vocabulary, so the (rows, vocab) fp32 logits never exist (3 such tensors less at the top of backward; one "
       "more product of the head in backward); off = the whole logits at once, as transformers; auto = on where the "
       "device is a GPU (a dry run's target included), off on a CPU"},
      {"tf32",
       "fp32 products on a CUDA GPU: default = torch's defaults (matmuls in IEEE fp32, cuDNN convolutions in TF32); "
       "on = matmuls and convolutions in TF32 (faster, about 1e-3 relative error per product); off = both in IEEE "
       "fp32, as a CPU computes; no effect on 16-bit products or on a CPU"},
      {"log_every", "print a step line every N steps"},
      {"memory_every", "take memory snapshots at steps 0, 1 and every N steps"},
      {"memory_ranks",
       "several ranks: max = print one memory line per phase, each figure the largest over the ranks; all = also a "
       "line per rank (the metrics file has every rank's either way)"},
      {"memory_micro",
       "under accumulate_grad_batches > 1: first = print the phases of micro-step 0 only; all = of every micro-step "
       "(the metrics file has every micro-step's either way)"},
      {"peak_tflops",
       "peak TFLOP/s of one device for MFU (Llama, OPT); 0 = the GPU's from tessera's table (H100, H200, A100), "
       "none on the CPU"},
      {"predict",
       "true = predict the run's memory per phase before it starts (a dry run on the meta device) and print it "
       "against the measured figures at the end, both in the metrics"},
      {"peak_holders",
       "--dry-run: also list the N largest holders of the predicted peak, the bytes live then by what allocated "
       "them (the LibTorch operator, and the autograd node in backward); 0 = none"},
      {"device_memory",
       "the memory one device has, for --dry-run's FITS / DOES NOT FIT, e.g. 80GiB or 40GB; empty = this "
       "machine's device (a GPU's total memory, the host's RAM on the CPU)"},
      {"predict_mfu", "the model FLOPs utilization the predicted step time assumes, in (0, 1]"},
      {"link_gb_s",
       "GB/s each rank sends to the next in the predicted ring collectives (NVLink 4: ~450; PCIe 4 x16: ~25; "
       "InfiniBand NDR: ~50), > 0"},
      {"max_memory",
       "CPU runs: the memory one rank may hold, e.g. 2GiB; an allocation beyond it stops the run with the phase, "
       "the breakdown, the predicted need and the changes that would fit (as a GPU's out-of-memory does); empty = "
       "no limit"},
  }};
};

// Upper bounds of the numeric keys, each far beyond any real run and low enough that the products the
// engine forms (ranks * batch_size * seq_len * accumulate_grad_batches tokens per step, steps * tokens)
// are checked rather than wrapped. validate() names the bound and why in its message.
namespace limits {
inline constexpr std::int64_t seq_len = 1 << 20;                  // 8x the longest context of any supported model
inline constexpr std::int64_t batch_size = 1 << 20;               // rows per rank per micro-step
inline constexpr std::int64_t accumulate_grad_batches = 1 << 20;  // micro-steps per optimizer step
inline constexpr std::int64_t global_batch_size = 1ll << 40;       // rows per optimizer step over all ranks
inline constexpr std::int64_t max_epochs = 1'000'000;
inline constexpr std::int64_t max_steps = 1'000'000'000'000;
inline constexpr std::int64_t num_train_samples = 1ll << 40;      // rows: far more than any token file holds
inline constexpr std::int64_t shard_group_size = 1 << 20;         // ranks
inline constexpr std::int64_t lora_r = 1 << 16;                   // wider than every linear of the supported models
inline constexpr double bucket_cap_mb = 1 << 20;                  // 1 TiB: larger than any device's memory
inline constexpr std::int64_t threads = 1 << 12;                  // make_runtime also caps it at the machine's threads
inline constexpr std::int64_t peak_holders = 1000;                // lines of a table to read
}  // namespace limits

// Throws ConfigError listing every broken rule, one "key=value: what is allowed" per line.
void validate(const RunConfig& cfg);

// parse_args over the defaults, then validate. The seeds' names of keys are accepted too
// (batch_size_per_device = batch_size).
RunConfig parse_run_config(std::span<const std::string_view> args, const RunConfig& defaults = RunConfig{});

// global_batch_size > 0: accumulate_grad_batches = global_batch_size / (batch_size * ranks), or a ConfigError
// naming every factor when that does not divide. Otherwise cfg unchanged.
RunConfig with_global_batch(RunConfig cfg, std::int64_t ranks);

// True if any argument is --help or -h (checked before parsing, which would reject them).
bool wants_help(std::span<const std::string_view> args);

// The field functions (config/fields.hpp) for RunConfig are compiled once, in src/config/run_config.cpp, not in
// every program that parses a run config.
extern template std::size_t field_index<RunConfig>(std::string_view key);
extern template void set_field<RunConfig>(RunConfig& cfg, std::string_view key, std::string_view value);
extern template std::string format_field_value<RunConfig>(const RunConfig& cfg, std::size_t index);
extern template std::string config_table<RunConfig>(const RunConfig& cfg,
                                                    std::span<const std::pair<std::string, std::string>> extra);
extern template std::string config_help<RunConfig>(const RunConfig& defaults);
extern template RunConfig parse_args<RunConfig>(std::span<const std::string_view> args, RunConfig defaults);

}  // namespace tessera
