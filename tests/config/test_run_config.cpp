// tests: RunConfig defaults, overrides of every key, each validation rule and its message.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/main.hpp"
#include "tessera/models/llama.hpp"
#include "tessera/models/opt.hpp"

namespace {

namespace fs = std::filesystem;
using tessera::ConfigError;
using tessera::RunConfig;
using tessera::LrScaling;
using tessera::ReduceDtype;
using tessera::field_index;
using tessera::format_field_value;

RunConfig parse(std::vector<std::string_view> args) { return tessera::parse_run_config(args); }

// A fresh directory with one token file in it, removed at the end of the test.
class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() /
              ("tessera_config_test_" + std::to_string(std::random_device{}()))) {
    fs::create_directories(path_);
    std::ofstream(file()) << "tokens";
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string dir() const { return path_.string(); }
  std::string file() const { return (path_ / "tokens.bin").string(); }
  std::string missing() const { return (path_ / "missing").string(); }

 private:
  fs::path path_;
};

}  // namespace

TEST_CASE("RunConfig defaults are valid and match the documented ones", "[config]") {
  const RunConfig cfg = parse({});
  CHECK(cfg.model == "tiny");
  CHECK(cfg.model_dir.empty());
  CHECK(cfg.data.empty());
  CHECK(cfg.seq_len == 256);
  CHECK(cfg.lr == 1e-3);
  CHECK(cfg.batch_size == 8);
  CHECK(cfg.accumulate_grad_batches == 1);
  CHECK(cfg.max_epochs == 1);
  CHECK(cfg.max_steps == -1);
  CHECK(cfg.num_train_samples == -1);
  CHECK(cfg.limit_train_batches == 1.0);
  CHECK(cfg.seed == 42);
  CHECK_FALSE(cfg.weight_decay.has_value());
  CHECK(cfg.metrics.empty());
  CHECK(cfg.save_dir.empty());
  CHECK(cfg.device == "auto");
  CHECK(cfg.threads == 0);
  CHECK(cfg.log_every == 1);
  CHECK(cfg.memory_every == 50);
  CHECK(cfg.lr_scaling == LrScaling::none);
  CHECK(cfg.reduce_dtype == ReduceDtype::auto_);
  CHECK(cfg.wrap_blocks == "all");
  CHECK(cfg.checkpoint_blocks == "all");
}

TEST_CASE("enum keys are parsed once, their legal values named in the error", "[config]") {
  CHECK(parse({"lr_scaling=linear"}).lr_scaling == LrScaling::linear);
  CHECK(parse({"reduce_dtype=bf16"}).reduce_dtype == ReduceDtype::bf16);
  CHECK(parse({"reduce_dtype=fp16"}).reduce_dtype == ReduceDtype::fp16);
  CHECK(parse({"reduce_dtype=fp32"}).reduce_dtype == ReduceDtype::fp32);
  CHECK(parse({"reduce_dtype=param"}).reduce_dtype == ReduceDtype::param);
  CHECK_THROWS_WITH(parse({"lr_scaling=sqrt"}), "lr_scaling=sqrt: must be one of none, linear");
  CHECK_THROWS_WITH(parse({"reduce_dtype=fp8"}), "reduce_dtype=fp8: must be one of auto, param, fp32, bf16, fp16");
  CHECK_THROWS_WITH(parse({"lr_scaling=Linear"}), Catch::StartsWith("lr_scaling=Linear: must be one of"));
  // Formatting gives back what parses: the table and --help show the names.
  RunConfig cfg;
  cfg.lr_scaling = LrScaling::linear;
  CHECK(format_field_value(cfg, field_index<RunConfig>("lr_scaling")) == "linear");
  CHECK(format_field_value(cfg, field_index<RunConfig>("reduce_dtype")) == "auto");
  cfg.reduce_dtype = ReduceDtype::fp32;
  CHECK(format_field_value(cfg, field_index<RunConfig>("reduce_dtype")) == "fp32");
}

// Setting every key at once also proves the name table is in the struct's field order.
TEST_CASE("every RunConfig key can be overridden", "[config]") {
  TempDir tmp;
  fs::create_directories(tmp.dir() + "/model");  // outputs may not be written inside it
  const std::string model_dir = "model_dir=" + tmp.dir() + "/model";
  const std::string data = "data=" + tmp.file();
  const std::string metrics = "metrics=" + tmp.dir() + "/m.jsonl";
  const std::string save_dir = "save_dir=" + tmp.dir() + "/out/";
  const RunConfig cfg = parse({"model=open-llama-7b", model_dir, data, "seq_len=1024", "lr=3e-4",
                               "batch_size=2", "accumulate_grad_batches=4", "max_epochs=3",
                               "max_steps=100", "num_train_samples=64", "limit_train_batches=0.25",
                               "seed=7", "weight_decay=0.1", metrics, save_dir, "device=cuda:1",
                               "threads=4", "log_every=10", "memory_every=5"});
  CHECK(cfg.model == "open-llama-7b");
  CHECK(cfg.model_dir == tmp.dir() + "/model");
  CHECK(cfg.data == tmp.file());
  CHECK(cfg.seq_len == 1024);
  CHECK(cfg.lr == 3e-4);
  CHECK(cfg.batch_size == 2);
  CHECK(cfg.accumulate_grad_batches == 4);
  CHECK(cfg.max_epochs == 3);
  CHECK(cfg.max_steps == 100);
  CHECK(cfg.num_train_samples == 64);
  CHECK(cfg.limit_train_batches == 0.25);
  CHECK(cfg.seed == 7);
  CHECK(cfg.weight_decay == std::optional<double>(0.1));
  CHECK(cfg.metrics == tmp.dir() + "/m.jsonl");
  CHECK(cfg.save_dir == tmp.dir() + "/out/");
  CHECK(cfg.device == "cuda:1");
  CHECK(cfg.threads == 4);
  CHECK(cfg.log_every == 10);
  CHECK(cfg.memory_every == 5);
}

TEST_CASE("weight_decay accepts none and zero", "[config]") {
  CHECK_FALSE(parse({"weight_decay=none"}).weight_decay.has_value());
  CHECK(parse({"weight_decay=0"}).weight_decay == std::optional<double>(0.0));
}

TEST_CASE("parse_run_config reports parse errors with key and value", "[config]") {
  CHECK_THROWS_MATCHES(parse({"batch_size=abc"}), ConfigError,
                       Catch::Message("batch_size=abc: expected an integer"));
  CHECK_THROWS_WITH(parse({"lr=1e-3x"}), "lr=1e-3x: expected a number");
  CHECK_THROWS_WITH(parse({"weight_decay=big"}), "weight_decay=big: expected a number or none");
  CHECK_THROWS_WITH(parse({"bach_size=4"}),
                    Catch::StartsWith("unknown key 'bach_size' (did you mean 'batch_size'?); run "
                                      "with --help for all keys") &&
                        Catch::Contains("memory_every"));
  CHECK_THROWS_WITH(parse({"seed=1", "seed=2"}),
                    Catch::Contains("seed=2") && Catch::Contains("already given as seed=1"));
  CHECK_THROWS_WITH(parse({"batch_size"}), Catch::Contains("'batch_size'") &&
                                               Catch::Contains("form key=value") &&
                                               Catch::Contains("e.g. model=tiny"));
}

TEST_CASE("each validation rule names key, value and what is allowed", "[config]") {
  TempDir tmp;
  struct Case {
    std::vector<std::string> args;
    std::string shown;    // the "key=value" the message must start with
    std::string allowed;  // a fragment of the explanation
  };
  const std::vector<Case> cases{
      {{"lr=0"}, "lr=0", "finite number > 0"},
      {{"lr=-0.001"}, "lr=-0.001", "finite number > 0"},
      {{"lr=inf"}, "lr=inf", "finite number > 0"},
      {{"lr=nan"}, "lr=nan", "finite number > 0"},
      {{"batch_size=0"}, "batch_size=0", ">= 1"},
      {{"accumulate_grad_batches=0"}, "accumulate_grad_batches=0", ">= 1"},
      {{"max_epochs=0"}, "max_epochs=0", "set max_steps >= 1"},
      {{"max_epochs=-1", "max_steps=-1"}, "max_epochs=-1", "must be >= 1"},
      {{"max_steps=0"}, "max_steps=0", "-1 (run max_epochs) or >= 1"},
      {{"max_steps=-2"}, "max_steps=-2", "-1 (run max_epochs) or >= 1"},
      {{"num_train_samples=0"}, "num_train_samples=0", "-1 (all of the data) or >= 1"},
      {{"num_train_samples=-5"}, "num_train_samples=-5", "-1 (all of the data) or >= 1"},
      {{"limit_train_batches=0"}, "limit_train_batches=0", "(0, 1]"},
      {{"limit_train_batches=1.5"}, "limit_train_batches=1.5", "(0, 1]"},
      {{"limit_train_batches=nan"}, "limit_train_batches=nan", "(0, 1]"},
      {{"seq_len=1"}, "seq_len=1", ">= 2"},
      {{"weight_decay=-0.1"}, "weight_decay=-0.1", ">= 0, or none"},
      {{"weight_decay=inf"}, "weight_decay=inf", ">= 0, or none"},
      {{"device=gpu"}, "device=gpu", "auto, cpu, cuda or cuda:N"},
      {{"device=cuda:"}, "device=cuda:", "auto, cpu, cuda or cuda:N"},
      {{"device=cuda:x"}, "device=cuda:x", "auto, cpu, cuda or cuda:N"},
      {{"device=cuda:-1"}, "device=cuda:-1", "auto, cpu, cuda or cuda:N"},
      {{"device=CUDA"}, "device=CUDA", "auto, cpu, cuda or cuda:N"},
      {{"threads=-1"}, "threads=-1", ">= 0 (0 = the node's cores shared among its ranks)"},
      {{"log_every=0"}, "log_every=0", ">= 1"},
      {{"memory_every=0"}, "memory_every=0", ">= 1"},
      {{"wrap_blocks=,"}, "wrap_blocks=,", "all, none, or name block types"},
      {{"checkpoint_blocks="}, "checkpoint_blocks=", "all or name block types"},
      {{"model="}, "model=", "name one of the model family's presets"},
      {{"model_dir=" + tmp.missing()}, "model_dir=" + tmp.missing(), "not an existing directory"},
      {{"model_dir=" + tmp.file()}, "model_dir=" + tmp.file(), "not an existing directory"},
      {{"data=" + tmp.missing()}, "data=" + tmp.missing(), "not an existing file or directory"},
      {{"data=/dev/null"}, "data=/dev/null", "not an existing file or directory"},
      {{"metrics=" + tmp.missing() + "/m.jsonl"}, "metrics=" + tmp.missing() + "/m.jsonl",
       "parent directory " + tmp.missing() + " does not exist"},
      {{"save_dir=" + tmp.missing() + "/out/"}, "save_dir=" + tmp.missing() + "/out/",
       "parent directory " + tmp.missing() + " does not exist"},
      // Upper bounds: each names the bound and why.
      {{"seq_len=4294967296"}, "seq_len=4294967296", "at most 1048576 (8x the longest context"},
      {{"batch_size=1048577"}, "batch_size=1048577", "at most 1048576"},
      {{"accumulate_grad_batches=9223372036854775807"}, "accumulate_grad_batches=9223372036854775807", "at most 1048576"},
      {{"max_epochs=9223372036854775807"}, "max_epochs=9223372036854775807", "at most 1000000 (set max_steps"},
      {{"max_steps=9223372036854775807"}, "max_steps=9223372036854775807", "at most 1000000000000"},
      {{"num_train_samples=9223372036854775807"}, "num_train_samples=9223372036854775807", "at most 1099511627776"},
      {{"shard_group_size=4294967296"}, "shard_group_size=4294967296", "at most 1048576"},
      {{"lora_r=4294967296"}, "lora_r=4294967296", "at most 65536 (wider than every linear"},
      {{"bucket_cap_mb=1e13"}, "bucket_cap_mb=1e+13", "at most 1048576 (1 TiB"},
      {{"threads=4294967296"}, "threads=4294967296", "at most 4096"},
      // Outputs: never a directory, a device, an input of the run or the other output.
      {{"metrics=" + tmp.dir()}, "metrics=" + tmp.dir(), "names a directory"},
      {{"metrics=out/"}, "metrics=out/", "names a directory"},
      {{"metrics=/dev/null"}, "metrics=/dev/null", "exists and is not a regular file"},
      {{"data=" + tmp.file(), "metrics=" + tmp.file()}, "metrics=" + tmp.file(), "is the data file of this run"},
      {{"model_dir=" + tmp.dir(), "metrics=" + tmp.dir() + "/config.json"}, "metrics=" + tmp.dir() + "/config.json",
       "is inside model_dir=" + tmp.dir() + ", an input of this run"},
      {{"metrics=out", "save_dir=out/"}, "metrics=out", "is also save_dir"},
      {{"metrics=" + tmp.dir() + "/m.jsonl", "save_dir=" + tmp.dir()}, "metrics=" + tmp.dir() + "/m.jsonl",
       "is inside save_dir="},
      {{"save_dir=."}, "save_dir=.", "names the root, the working directory or its parent"},
      {{"save_dir=/"}, "save_dir=/", "names the root"},
      {{"save_dir=" + tmp.file()}, "save_dir=" + tmp.file(), "exists and is not an empty directory"},
  };
  for (const Case& c : cases) {
    INFO("case: " << c.shown);
    const std::vector<std::string_view> args(c.args.begin(), c.args.end());
    CHECK_THROWS_AS(tessera::parse_run_config(args), ConfigError);
    CHECK_THROWS_WITH(tessera::parse_run_config(args),
                      Catch::StartsWith(c.shown + ": ") && Catch::Contains(c.allowed));
  }
}

TEST_CASE("validate reports every broken rule at once, one per line", "[config]") {
  CHECK_THROWS_WITH(parse({"lr=0", "batch_size=0", "device=tpu"}),
                    "lr=0: must be a finite number > 0, e.g. lr=3e-4\n"
                    "batch_size=0: must be >= 1 (rows per rank per micro-step)\n"
                    "device=tpu: must be auto, cpu, cuda or cuda:N with N a GPU index, e.g. cuda:0");
}

TEST_CASE("validation accepts the edge values it allows", "[config]") {
  TempDir tmp;
  CHECK_NOTHROW(parse({"max_epochs=0", "max_steps=10"}));
  CHECK_NOTHROW(parse({"max_epochs=-1", "max_steps=1"}));
  CHECK_NOTHROW(parse({"limit_train_batches=1", "seq_len=2", "threads=0"}));
  CHECK_NOTHROW(parse({"limit_train_batches=1e-9"}));
  for (const char* device : {"device=auto", "device=cpu", "device=cuda", "device=cuda:0",
                             "device=cuda:12"}) {
    INFO(device);
    CHECK_NOTHROW(parse({device}));
  }
  // With model_dir set the preset name is not used, so it is not checked.
  const std::string model_dir = "model_dir=" + tmp.dir();
  CHECK_NOTHROW(parse({"model=whatever", model_dir}));
  // Outputs in the working directory have no parent part to check.
  CHECK_NOTHROW(parse({"metrics=m.jsonl", "save_dir=out/"}));
  // An existing metrics file is replaced; the bounds themselves are allowed.
  CHECK_NOTHROW(parse({"metrics=" + tmp.dir() + "/x.jsonl"}));
  CHECK_NOTHROW(parse({"seq_len=1048576", "batch_size=1048576", "lora_r=65536", "bucket_cap_mb=1048576",
                       "max_epochs=1000000", "threads=4096"}));
}

TEST_CASE("model= takes the experiment family's presets, --help lists them", "[config]") {
  // The run config knows no family: any non-empty name parses, and the family refuses what it lacks.
  CHECK(parse({"model=opt-125m"}).model == "opt-125m");
  CHECK_THROWS_WITH(parse({"model="}), Catch::Contains("model=: empty"));
  const std::string llama = tessera::family_help<tessera::models::Llama>();
  const std::string opt = tessera::family_help<tessera::models::Opt>();
  for (const std::string_view name : tessera::models::Llama::preset_names()) {
    CHECK(llama.find(name) != std::string::npos);
    CHECK_NOTHROW(tessera::models::Llama::preset(name));
  }
  for (const std::string_view name : tessera::models::Opt::preset_names()) {
    CHECK(opt.find(name) != std::string::npos);
    CHECK_NOTHROW(tessera::models::Opt::preset(name));
  }
  CHECK(llama.find("opt-125m") == std::string::npos);
  CHECK_THROWS_WITH(tessera::models::Opt::preset("open-llama-7b"),
                    Catch::Contains("model=open-llama-7b: no such preset") && Catch::Contains("opt-1.3b"));
}

TEST_CASE("wants_help spots --help and -h anywhere", "[config]") {
  using Args = std::vector<std::string_view>;
  CHECK(tessera::wants_help(Args{"--help"}));
  CHECK(tessera::wants_help(Args{"lr=1", "-h"}));
  CHECK_FALSE(tessera::wants_help(Args{}));
  CHECK_FALSE(tessera::wants_help(Args{"lr=1", "help", "--helpful"}));
}

TEST_CASE("the RunConfig table and help list every key", "[config]") {
  RunConfig cfg;
  cfg.batch_size = 31337;
  const std::string table = tessera::config_table(cfg);
  const std::string help = tessera::config_help(RunConfig{});
  CHECK(table.starts_with("run config\n"));
  CHECK(table.find("31337") != std::string::npos);
  for (const tessera::FieldDoc& doc : tessera::config_fields<RunConfig>::docs) {
    INFO(doc.name);
    CHECK(table.find("  " + std::string(doc.name) + " ") != std::string::npos);
    CHECK(help.find("  " + std::string(doc.name) + " ") != std::string::npos);
    CHECK(help.find(doc.meaning) != std::string::npos);
  }
}

TEST_CASE("the seeds' batch_size_per_device is batch_size, giving both is giving batch_size twice", "[config]") {
  CHECK(parse({"batch_size_per_device=3"}).batch_size == 3);
  CHECK_THROWS_WITH(parse({"batch_size=2", "batch_size_per_device=3"}),
                    Catch::Contains("key 'batch_size' was already given"));
  // Over other defaults (a catalogue entry's): the command line wins.
  RunConfig entry;
  entry.batch_size = 64;
  CHECK(tessera::parse_run_config(std::vector<std::string_view>{"batch_size_per_device=16"}, entry).batch_size == 16);
  CHECK(tessera::parse_run_config(std::vector<std::string_view>{}, entry).batch_size == 64);
}

TEST_CASE("global_batch_size sets the accumulation over batch_size x ranks, or names every factor", "[config]") {
  RunConfig cfg = parse({"batch_size=4", "global_batch_size=64"});
  CHECK(cfg.accumulate_grad_batches == 1);  // resolved once the ranks are known
  CHECK(tessera::with_global_batch(cfg, 4).accumulate_grad_batches == 4);
  CHECK(tessera::with_global_batch(cfg, 1).accumulate_grad_batches == 16);
  CHECK(tessera::with_global_batch(cfg, 16).accumulate_grad_batches == 1);
  CHECK_THROWS_WITH(tessera::with_global_batch(cfg, 32),
                    "global_batch_size=64: not a multiple of batch_size (4) x ranks (32) = 128 rows per micro-step; "
                    "choose a multiple of it (e.g. 128), or change batch_size or the number of ranks");
  CHECK_THROWS_WITH(tessera::with_global_batch(parse({"batch_size=4", "global_batch_size=6"}), 1),
                    Catch::StartsWith("global_batch_size=6: not a multiple of batch_size (4) x ranks (1) = 4"));
  CHECK(tessera::with_global_batch(parse({"accumulate_grad_batches=3"}), 8).accumulate_grad_batches == 3);
  CHECK_THROWS_WITH(parse({"global_batch_size=64", "accumulate_grad_batches=2"}),
                    Catch::Contains("accumulate_grad_batches=2: is set by global_batch_size=64"));
  CHECK_THROWS_WITH(parse({"global_batch_size=-1"}), Catch::Contains("global_batch_size=-1: must be >= 0"));
}

TEST_CASE("beta1 and beta2 default to torch's and must lie in 0 <= beta < 1", "[config]") {
  CHECK(parse({}).beta1 == 0.9);
  CHECK(parse({}).beta2 == 0.999);
  CHECK(parse({"beta2=0.95"}).beta2 == 0.95);
  CHECK_THROWS_WITH(parse({"beta1=1"}), Catch::Contains("beta1=1: must be in [0, 1)"));
  CHECK_THROWS_WITH(parse({"beta2=-0.5"}), Catch::Contains("beta2=-0.5: must be in [0, 1)"));
}
