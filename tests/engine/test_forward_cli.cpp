// strata-cli forward and generate as a script sees them: JSON on stdout, .npy dumps that match the golden
// tensors, greedy ids equal to the golden continuation, and an error line plus exit status on bad input.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "strata/model.hpp"
#include "strata/npy.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using namespace strata;

namespace {

using Result = test::CliResult;
using test::ids_arg;
using test::quote;
using test::run_cli;

}  // namespace

TEST_CASE("strata-cli forward prints top-k per position and dumps tensors that match the golden data", "[forward]") {
    const auto e = test::expected()["prompts"]["short"];
    const auto tokens = e["tokens"].get<std::vector<int32_t>>();
    const fs::path dump = test::temp_dir("dump");
    const Result r = run_cli("forward --model " + quote(test::golden_hf_dir().string()) + " --tokens " +
                             ids_arg(tokens) + " --top-k 4 --dump " + quote(dump.string()));
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["tokens"].get<std::vector<int32_t>>() == tokens);
    CHECK(j["model"]["demo"] == false);
    REQUIRE(j["positions"].size() == tokens.size());

    const NpyArray ref_logits = read_npy(test::reference_dir() / "short" / "logits.npy");
    const int64_t V = ref_logits.shape[1];
    for (size_t p = 0; p < tokens.size(); ++p) {
        const auto& pos = j["positions"][p];
        CHECK(pos["position"] == p);
        CHECK(pos["token"] == tokens[p]);
        REQUIRE(pos["top_k"].size() == 4);
        const auto row = std::span(ref_logits.data).subspan(p * size_t(V), size_t(V));
        const float top = *std::max_element(row.begin(), row.end());
        // Same logit as the reference's best, and probabilities that are a decreasing part of 1.
        CHECK(pos["top_k"][0]["logit"].get<double>() == Approx(top).epsilon(5e-3));
        double prev = 1.0;
        for (const auto& t : pos["top_k"]) {
            CHECK(t["prob"].get<double>() <= prev);
            prev = t["prob"].get<double>();
            CHECK(t.contains("text"));
        }
    }

    for (std::string name : {"x0", "h.0", "h.1", "h.2", "norm", "logits"}) {
        INFO(name);
        const NpyArray got = read_npy(dump / (name + ".npy"));
        const NpyArray ref = read_npy(test::reference_dir() / "short" / (name + ".npy"));
        CHECK(got.shape == ref.shape);
        CHECK(test::rel_l2(got.data, ref.data) < 5e-3);
    }
    const NpyArray q = read_npy(dump / "layers.0.q.npy");
    CHECK(q.shape == std::vector<int64_t>{int64_t(tokens.size()), 128});
    CHECK(fs::exists(dump / "layers.2.ffn_hidden.npy"));
    CHECK_FALSE(fs::exists(dump / "layers.0.attention.probs.npy"));  // only with --probs
}

TEST_CASE("strata-cli generate --json gives the golden greedy ids; --text is BOS + plain encoding", "[generate]") {
    const auto e = test::expected()["prompts"]["short"];
    const std::string model = quote(test::golden_hf_dir().string());
    const Result r = run_cli("generate --model " + model + " --tokens " + ids_arg(e["tokens"].get<std::vector<int32_t>>()) +
                             " --max-tokens 16 --temperature 0 --json");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    const auto ids = j["ids"].get<std::vector<int32_t>>();
    CHECK(ids == e["greedy_ids"].get<std::vector<int32_t>>());
    CHECK(j["stop_reason"] == "max_tokens");
    CHECK(j["demo"] == false);

    const Result t = run_cli("generate --model " + model + " --text " + quote(e["text"].get<std::string>()) +
                             " --max-tokens 16 --temperature 0 --json");
    REQUIRE(t.status == 0);
    const auto jt = nlohmann::json::parse(t.out);
    CHECK(jt["ids"] == j["ids"]);
    CHECK(jt["text"] == j["text"]);
    CHECK(jt["prompt_tokens"] == e["tokens"].size());

    // Streaming prints the same text, and nothing else, on stdout.
    const Result s = run_cli("generate --model " + model + " --text " + quote(e["text"].get<std::string>()) +
                             " --max-tokens 16 --temperature 0");
    REQUIRE(s.status == 0);
    CHECK(s.out == j["text"].get<std::string>());

    // A binary16 KV cache: the same greedy continuation on this model (test_vulkan_kv_f16.cpp checks its logits).
    const std::string prompt = ids_arg(e["tokens"].get<std::vector<int32_t>>());
    const Result h =
        run_cli("generate --model " + model + " --tokens " + prompt + " --max-tokens 16 --json --kv-cache f16");
    INFO(h.err);
    REQUIRE(h.status == 0);
    CHECK(nlohmann::json::parse(h.out)["ids"] == j["ids"]);
}

TEST_CASE("strata-cli forward and generate fail cleanly on bad input", "[forward]") {
    const std::string model = quote(test::golden_hf_dir().string());
    const Result bad_id = run_cli("forward --model " + model + " --tokens 128000,999999");
    CHECK(bad_id.status == 1);
    CHECK(bad_id.err.find("999999") != std::string::npos);
    CHECK(bad_id.out.empty());
    const Result both = run_cli("generate --model " + model + " --tokens 1 --text hi --json");
    CHECK(both.status == 2);
    const Result kv = run_cli("generate --model " + model + " --tokens 1 --kv-cache f8");
    CHECK(kv.status == 2);
    CHECK(kv.err.find("f8") != std::string::npos);
    const Result typo = run_cli("forward --model " + model + " --tokens 1 --topk 3");
    CHECK(typo.status == 2);
    CHECK(typo.err.find("--topk") != std::string::npos);
    const Result vk = run_cli("forward --model " + model + " --tokens 1 --backend tpu");
    CHECK(vk.status == 2);
}
