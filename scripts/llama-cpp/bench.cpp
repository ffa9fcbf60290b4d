// A llama-bench-style measurement of llama.cpp's CPU backend, for scripts/bench-cpu.sh --llama-cpp: the same
// files, the same threads, alternating with strata-cli bench. Built by scripts/llama-cpp/fetch against the shared
// libraries of a prebuilt llama.cpp (node-llama-cpp's linux-x64 package: libllama plus one libggml-cpu per x86
// level, the best one for this CPU chosen at run time, as llama.cpp's release builds do). Not part of Strata.
//
//   bench MODEL.gguf --prompt 64 --gen 32 --threads 2 --repeats 3 [--depth D] [--cpu-variant haswell]
//                                                                                     -> one JSON object
//   (--cpu-variant loads only libggml-cpu-NAME.so: haswell is llama.cpp's AVX2 build, zen4 its AVX-512 one;
//   --depth D: tg decodes after D random tokens in the cache, as llama-bench's -d, and as strata-cli bench
//   decodes after its prompt)
//   bench quantize IN.gguf OUT.gguf TYPE                              -> llama.cpp writes OUT (Q8_0, Q4_K_M, F16)
//
// No llama.h of the matching version exists here, so the parameter structs are opaque: the library's default
// parameters are returned into a buffer larger than any version's struct and passed back unchanged (structs this
// size travel in memory on x86-64 System V, so the callee reads only its own fields). The few functions used keep
// the signatures they have had since 2025; threads are set with llama_set_n_threads.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
struct Opaque {
    alignas(16) unsigned char bytes[2048];
};
struct Batch {  // llama_batch
    int32_t n_tokens;
    int32_t* token;
    float* embd;
    int32_t* pos;
    int32_t* n_seq_id;
    int32_t** seq_id;
    int8_t* logits;
};
}  // namespace

extern "C" {
struct llama_model;
struct llama_context;
struct llama_vocab;
using log_callback = void (*)(int level, const char* text, void* user);
void llama_log_set(log_callback cb, void* user);
void ggml_backend_load_all_from_path(const char* dir);
void* ggml_backend_load(const char* path);
void llama_backend_init(void);
Opaque llama_model_default_params(void);
Opaque llama_context_default_params(void);
Opaque llama_model_quantize_default_params(void);
llama_model* llama_model_load_from_file(const char* path, Opaque params);
llama_context* llama_init_from_model(llama_model* model, Opaque params);
const llama_vocab* llama_model_get_vocab(const llama_model* model);
int32_t llama_vocab_n_tokens(const llama_vocab* vocab);
void llama_set_n_threads(llama_context* ctx, int32_t n_threads, int32_t n_threads_batch);
void* llama_get_memory(const llama_context* ctx);
void llama_memory_clear(void* mem, bool data);
Batch llama_batch_get_one(int32_t* tokens, int32_t n_tokens);
int32_t llama_decode(llama_context* ctx, Batch batch);
void llama_synchronize(llama_context* ctx);
uint32_t llama_model_quantize(const char* in, const char* out, const void* params);
void llama_free(llama_context* ctx);
void llama_model_free(llama_model* model);
}

namespace {
std::string g_backend;  // which libggml-cpu the loader chose, from its log
bool g_verbose = false;

void on_log(int /*level*/, const char* text, void* /*user*/) {
    if (std::strstr(text, "loaded CPU backend from")) {
        const char* slash = std::strrchr(text, '/');
        g_backend = slash ? slash + 1 : text;
        while (!g_backend.empty() && (g_backend.back() == '\n' || g_backend.back() == ' ')) g_backend.pop_back();
    }
    if (g_verbose) std::fputs(text, stderr);
}

std::string lib_dir(const char* argv0) {
    if (const char* d = std::getenv("STRATA_LLAMA_CPP_LIB")) return d;
    std::string s = argv0;
    const size_t slash = s.rfind('/');
    return slash == std::string::npos ? std::string(".") : s.substr(0, slash);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int usage() {
    std::fprintf(stderr,
                 "usage: bench MODEL.gguf [--prompt N] [--gen M] [--threads T] [--repeats R] [--depth D]\n"
                 "             [--cpu-variant NAME] [--verbose]\n"
                 "       bench quantize IN.gguf OUT.gguf Q8_0|Q4_K_M|Q4_0|F16\n");
    return 2;
}

int quantize(int argc, char** argv) {
    if (argc != 5) return usage();
    const std::string type = argv[4];
    int32_t ftype = -1;  // enum llama_ftype: values unchanged since GGUF began
    if (type == "F16") ftype = 1;
    if (type == "Q4_0") ftype = 2;
    if (type == "Q8_0") ftype = 7;
    if (type == "Q4_K_M") ftype = 15;
    if (ftype < 0) return usage();
    Opaque p = llama_model_quantize_default_params();
    const int32_t nthread = 2;
    std::memcpy(p.bytes + 0, &nthread, 4);  // nthread, then ftype: the struct's first two fields
    std::memcpy(p.bytes + 4, &ftype, 4);
    const uint32_t rc = llama_model_quantize(argv[2], argv[3], p.bytes);
    if (rc != 0) std::fprintf(stderr, "bench: llama_model_quantize failed (%u)\n", rc);
    return rc == 0 ? 0 : 1;
}
}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return usage();
    std::string variant;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--verbose") == 0) g_verbose = true;
        if (std::strcmp(argv[i], "--cpu-variant") == 0 && i + 1 < argc) variant = argv[i + 1];
    }
    llama_log_set(on_log, nullptr);
    if (variant.empty()) {
        ggml_backend_load_all_from_path(lib_dir(argv[0]).c_str());
    } else {
        const std::string so = lib_dir(argv[0]) + "/libggml-cpu-" + variant + ".so";
        if (!ggml_backend_load(so.c_str())) {
            std::fprintf(stderr, "bench: could not load %s (does this CPU run it?)\n", so.c_str());
            return 1;
        }
        g_backend = "libggml-cpu-" + variant + ".so";
    }
    llama_backend_init();
    if (std::strcmp(argv[1], "quantize") == 0) return quantize(argc, argv);

    int n_prompt = 64, n_gen = 32, threads = 2, repeats = 3, depth = 0;
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() { return i + 1 < argc ? std::atoi(argv[++i]) : -1; };
        if (a == "--prompt") n_prompt = next();
        else if (a == "--gen") n_gen = next();
        else if (a == "--threads") threads = next();
        else if (a == "--repeats") repeats = next();
        else if (a == "--depth") depth = next();
        else if (a == "--cpu-variant") ++i;
        else if (a != "--verbose") return usage();
    }
    if (n_prompt < 1 || n_gen < 1 || threads < 1 || repeats < 1 || depth < 0) return usage();

    llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) {
        std::fprintf(stderr, "bench: llama.cpp could not load %s\n", argv[1]);
        return 1;
    }
    Opaque cparams = llama_context_default_params();
    // n_ctx and n_batch are the first two fields of llama_context_params (uint32_t) in every version; their
    // defaults (512, 2048) are raised only where the prompt (one batch) or the depth needs more, so the usual runs
    // keep llama.cpp's defaults.
    uint32_t n_ctx, n_batch;
    std::memcpy(&n_ctx, cparams.bytes, 4);
    std::memcpy(&n_batch, cparams.bytes + 4, 4);
    n_ctx = std::max<uint32_t>(n_ctx, static_cast<uint32_t>(std::max(n_prompt, depth + n_gen)));
    n_batch = std::max<uint32_t>(n_batch, static_cast<uint32_t>(n_prompt));
    std::memcpy(cparams.bytes, &n_ctx, 4);
    std::memcpy(cparams.bytes + 4, &n_batch, 4);
    llama_context* ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        std::fprintf(stderr, "bench: llama.cpp could not make a context\n");
        return 1;
    }
    llama_set_n_threads(ctx, threads, threads);
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::srand(1);

    // As llama-bench: pp = one batch of n_prompt random tokens into an empty cache; tg = n_gen single-token
    // decodes into an empty cache. One warm-up of each, then the mean over the repeats.
    auto run_prompt = [&]() {
        std::vector<int32_t> t(static_cast<size_t>(n_prompt));
        t[0] = 128000;
        for (int i = 1; i < n_prompt; ++i) t[static_cast<size_t>(i)] = std::rand() % n_vocab;
        llama_memory_clear(llama_get_memory(ctx), false);
        const auto t0 = std::chrono::steady_clock::now();
        if (llama_decode(ctx, llama_batch_get_one(t.data(), n_prompt)) != 0) return -1.0;
        llama_synchronize(ctx);
        return seconds_since(t0);
    };
    auto run_gen = [&]() {
        llama_memory_clear(llama_get_memory(ctx), false);
        std::vector<int32_t> fill(static_cast<size_t>(depth));
        for (int i = 0; i < depth; ++i) fill[static_cast<size_t>(i)] = i == 0 ? 128000 : std::rand() % n_vocab;
        for (int i = 0; i < depth; i += 512)  // in batches the default n_batch takes
            if (llama_decode(ctx, llama_batch_get_one(fill.data() + i, std::min(512, depth - i))) != 0) return -1.0;
        int32_t tok = 128000;
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n_gen; ++i) {
            if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) return -1.0;
            llama_synchronize(ctx);
            tok = std::rand() % n_vocab;
        }
        return seconds_since(t0);
    };
    if (run_prompt() < 0 || run_gen() < 0) {
        std::fprintf(stderr, "bench: llama_decode failed\n");
        return 1;
    }
    std::vector<double> pp, tg;
    for (int r = 0; r < repeats; ++r) {
        pp.push_back(n_prompt / run_prompt());
        tg.push_back(n_gen / run_gen());
    }
    auto mean = [](const std::vector<double>& v) {
        double s = 0;
        for (double x : v) s += x;
        return s / static_cast<double>(v.size());
    };
    std::printf(
        "{\"engine\": \"llama.cpp\", \"cpu_backend\": \"%s\", \"threads\": %d, \"repeats\": %d, "
        "\"prefill\": {\"tokens\": %d, \"tokens_per_second\": %.3f, \"min\": %.3f, \"max\": %.3f}, "
        "\"decode\": {\"tokens\": %d, \"depth\": %d, \"tokens_per_second\": %.3f, \"min\": %.3f, \"max\": %.3f}}\n",
        g_backend.c_str(), threads, repeats, n_prompt, mean(pp), *std::min_element(pp.begin(), pp.end()),
        *std::max_element(pp.begin(), pp.end()), n_gen, depth, mean(tg), *std::min_element(tg.begin(), tg.end()),
        *std::max_element(tg.begin(), tg.end()));
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
