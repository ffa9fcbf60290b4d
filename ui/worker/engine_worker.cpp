#include "worker/engine_worker.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QStandardPaths>

#include "strata/backend.hpp"
#include "strata/demo.hpp"
#include "strata/error.hpp"
#include "strata/host_memory.hpp"
#include "strata/intervention.hpp"
#include "strata/model.hpp"
#include "strata/npy.hpp"
#include "strata/transformer.hpp"
#ifdef STRATA_HAVE_VULKAN
#include "strata/vulkan.hpp"
#endif
#include "chat/chat_engine.hpp"
#include "worker/analysis.hpp"
#include "worker/run_memory.hpp"
#include "worker/token_text.hpp"

namespace strata::ui {

namespace {
std::filesystem::path fsPath(const QString& p) { return std::filesystem::path(p.toStdString()); }
QString q(const std::string& s) { return QString::fromStdString(s); }
QString q(std::string_view s) { return QString::fromUtf8(s.data(), qsizetype(s.size())); }
}  // namespace

uint64_t WeightInfo::numel() const {
    uint64_t n = shape.empty() ? 0 : 1;
    for (int64_t d : shape) n *= uint64_t(d);
    return n;
}

void registerWorkerTypes() {
    qRegisterMetaType<ModelSummaryPtr>();
    qRegisterMetaType<LoadStatus>();
    qRegisterMetaType<RunResultPtr>();
    qRegisterMetaType<LensResultPtr>();
    qRegisterMetaType<NearestResultPtr>();
    qRegisterMetaType<WeightPreviewPtr>();
    qRegisterMetaType<AblationList>();
    qRegisterMetaType<CompareResultPtr>();
    qRegisterMetaType<SweepResultPtr>();
    qRegisterMetaType<AttributionResultPtr>();
}

EngineWorker::EngineWorker() = default;

EngineWorker::~EngineWorker() {
    // The transformer and backend refer to the model: release them first.
    chat_.reset();
    transformer_.reset();
    backend_.reset();
    model_.reset();
}

void EngineWorker::cancelUpTo(qint64 id) {
    qint64 cur = cancelledUpTo_.load();
    while (id > cur && !cancelledUpTo_.compare_exchange_weak(cur, id)) {
    }
    abort_.store(true);
}

void EngineWorker::shutdown() {
    shutdown_.store(true);
    abort_.store(true);
    const std::lock_guard<std::mutex> lock(chatStopMutex_);
    if (chatStop_) chatStop_->store(true);
}

void EngineWorker::beginTask(qint64 id) {
    // A cancel that arrived before this task started still applies to it; after shutdown() everything is.
    abort_.store(shutdown_.load() || id <= cancelledUpTo_.load());
}

QString EngineWorker::cacheDir() {
    const QByteArray env = qgetenv("STRATA_CACHE_DIR");
    if (!env.isEmpty()) return QString::fromLocal8Bit(env);
    return QDir::homePath() + "/.cache/strata";
}

QString EngineWorker::demoDir() {
    if (!qEnvironmentVariableIsEmpty("STRATA_CACHE_DIR")) return cacheDir() + "/demo";
    const QString data = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    return (data.isEmpty() ? cacheDir() : data) + "/demo";
}

QStringList EngineWorker::tokenizerCandidates() {
    QStringList c;
    if (!qEnvironmentVariableIsEmpty("STRATA_CACHE_DIR")) c << cacheDir() + "/tokenizer/tokenizer.json";
    c << QDir::homePath() + "/.cache/strata/tokenizer/tokenizer.json";
    c << QCoreApplication::applicationDirPath() + "/../share/strata/tokenizer.json";
    for (const QString& d : QStandardPaths::standardLocations(QStandardPaths::GenericDataLocation))
        c << d + "/strata/tokenizer.json";
    for (QString& p : c) p = QDir::cleanPath(p);
    c.removeDuplicates();
    return c;
}

QString EngineWorker::cachedTokenizer() {
    const QStringList c = tokenizerCandidates();
    for (const QString& p : c)
        if (QFileInfo(p).isFile()) return p;
    return c.first();
}

void EngineWorker::listDevices() {
    QStringList names;
    int chosen = -1;
    QString problem;
#ifdef STRATA_HAVE_VULKAN
    try {
        bool usable = false;
        for (const VulkanDeviceInfo& d : list_vulkan_devices()) {
            names << tr("%1 (%2)").arg(q(d.name), q(d.type));
            if (d.chosen) chosen = d.index;
            usable = usable || d.usable;
        }
        if (names.isEmpty())
            problem = tr("the Vulkan loader found no device (no Vulkan driver is installed)");
        else if (!usable)
            problem = tr("no Vulkan device here has what Strata needs (Vulkan 1.2, compute, subgroup arithmetic)");
    } catch (const std::exception& e) {
        problem = QString::fromUtf8(e.what());
    }
#else
    problem = tr("this build of Strata has no Vulkan backend");
#endif
    emit devicesListed(names, chosen, problem);
}

void EngineWorker::openModel(qint64 id, const QString& path, const QString& backend) {
    beginTask(id);
    load(id, path, backend);
}

void EngineWorker::openDemo(qint64 id, const QString& backend) {
    beginTask(id);
    const QString dir = demoDir();
    // A folder an older Strata wrote (random weights, or other trained weights) is written again.
    if (!QFileInfo::exists(dir + "/config.json") || !demo_model_is_current(fsPath(dir))) {
        const QString tokenizer = cachedTokenizer();
        const QString what = tr("writing the demonstration model to %1").arg(dir);
        if (!QFileInfo::exists(tokenizer)) {
            emit failed(id, what,
                        tr("the Llama 3 tokenizer.json is needed and was not found (looked in %1). The strata package "
                           "installs it in /usr/share/strata; in a source checkout, scripts/setup downloads it. Or "
                           "open a real checkpoint with File \u25b8 Open.")
                            .arg(tokenizerCandidates().join(QStringLiteral(", "))));
            return;
        }
        emit loadProgress(id, LoadStatus{tr("writing the demonstration model"), 0, 0, 0, 0});
        try {
            // Written next to its final place and renamed, so a half-written folder is never opened.
            const QString tmp = dir + ".tmp-" + QString::number(QCoreApplication::applicationPid());
            QDir(tmp).removeRecursively();
            QDir().mkpath(tmp);
            make_demo_model(fsPath(tmp), fsPath(tokenizer));
            if (QFileInfo::exists(dir) && !demo_model_is_current(fsPath(dir))) QDir(dir).removeRecursively();
            if (!QDir().rename(tmp, dir) && !QFileInfo::exists(dir + "/config.json")) {
                emit failed(id, what, tr("cannot rename %1 to %2").arg(tmp, dir));
                return;
            }
            QDir(tmp).removeRecursively();
        } catch (const std::exception& e) {
            emit failed(id, what, QString::fromUtf8(e.what()));
            return;
        }
    }
    load(id, dir, backend);
}

void EngineWorker::load(qint64 id, const QString& path, const QString& backendName) {
    const QString what = tr("opening %1").arg(path);
    try {
        std::mutex progressMutex;  // the loaders may report from their own threads
        QElapsedTimer throttle;
        throttle.start();
        LoadStatus status;
        status.phase = tr("reading the checkpoint");
        LoadProgress progress;
        progress.cancel = &abort_;
        progress.on_progress = [&](uint64_t bytes, uint64_t total, int64_t tensors, int64_t tensorsTotal) {
            std::lock_guard<std::mutex> lock(progressMutex);
            status.bytesDone = bytes;
            status.bytesTotal = total;
            status.tensorsDone = tensors;
            status.tensorsTotal = tensorsTotal;
            if (throttle.elapsed() >= 40 || tensors == tensorsTotal) {
                throttle.restart();
                emit loadProgress(id, status);
            }
        };
        emit loadProgress(id, status);
        std::unique_ptr<Model> model = load_model(fsPath(path), progress);
        // As strata-cli does: a NaN or Inf weight (or a malformed block) is a clear error naming the tensor, not a
        // model whose every view shows NaN (and whose Storage view quantizes garbage).
        status.phase = tr("checking the weights");
        emit loadProgress(id, status);
        check_weights_finite(*model);

        BackendOptions options;
        options.name = backendName.section(QLatin1Char(':'), 0, 0).toStdString();  // "vulkan:1": device 1
        if (backendName.contains(QLatin1Char(':'))) options.device_index = backendName.section(QLatin1Char(':'), 1).toInt();
        QString note;
        std::unique_ptr<Backend> backend;
        auto fallBackToCpu = [&](const std::exception& e) {
            note = tr("Vulkan is not available here, so Strata uses the CPU backend instead (%1). To use a GPU, install "
                      "its Vulkan driver (mesa-vulkan-drivers for AMD and Intel, the NVIDIA driver for NVIDIA).")
                       .arg(QString::fromUtf8(e.what()));
            options.name = "cpu";
            backend = make_backend(options);
        };
        try {
            backend = make_backend(options);
        } catch (const Cancelled&) {
            throw;
        } catch (const std::exception& e) {
            if (options.name == "cpu") throw;
            fallBackToCpu(e);
        }
        status.phase = options.name == "vulkan" ? tr("uploading the weights to the GPU") : tr("binding the weights");
        try {
            backend->load(*model, progress);
        } catch (const Cancelled&) {
            throw;
        } catch (const DeviceError& e) {
            if (options.name == "cpu") throw;
            fallBackToCpu(e);
            backend->load(*model, progress);
        }
        auto transformer = std::make_unique<Transformer>(*model, *backend);

        chat_.reset();
        transformer_.reset();
        backend_.reset();
        model_.reset();
        model_ = std::move(model);
        backend_ = std::move(backend);
        transformer_ = std::move(transformer);
        backendNote_ = note;
        embeddingNorms_.clear();
        plainCache_.reset();
        emit modelLoaded(id, summarize(*model_, backend_->info(), backendNote_));
    } catch (const Cancelled&) {
        emit cancelled(id, what);
    } catch (const std::exception& e) {
        emit failed(id, what, QString::fromUtf8(e.what()));
    }
}

ModelSummaryPtr EngineWorker::summarize(const Model& m, const BackendInfo& info, const QString& backendNote) {
    auto s = std::make_shared<ModelSummary>();
    s->config = m.config;
    s->path = q(m.path.string());
    s->name = m.config.name.empty() ? QFileInfo(s->path).fileName() : q(m.config.name);
    s->format = q(format_name(m.format));
    if (m.has(names::layer(0, "attention.wq"))) s->dtype = q(dtype_name(m.tensor(names::layer(0, "attention.wq")).dtype));
    s->backend = q(info.backend);
    s->device = q(info.device);
    s->deviceType = q(info.device_type);
    s->backendNote = backendNote;
    s->parameters = m.parameter_count();
    s->parameterGroups = m.parameter_groups();
    s->fileBytes = m.file_bytes();
    for (const auto& [name, t] : m.tensors) s->weights[name] = WeightInfo{q(dtype_name(t.dtype)), t.shape};
    auto keepGain = [&](const std::string& name) {
        if (m.has(name)) s->gains[name] = m.tensor(name).to_f32();
    };
    for (int64_t i = 0; i < m.config.n_layers; ++i) {
        keepGain(names::layer(i, "attention_norm"));
        keepGain(names::layer(i, "ffn_norm"));
    }
    keepGain("norm");
    return s;
}

TraceRequest EngineWorker::explorerRequest(const ModelConfig& c, int64_t T) {
    TraceRequest request;
    request.residuals = true;
    request.attention_probs = T <= kMaxProbsPositions;
    request.logits_all_positions = true;
    request.keep_logits = T * c.vocab_size <= kKeptLogitsFloats;
    request.top_k = kTopK;
    // Everything while it fits the budget; for long prompts on big models the residual stream and what each
    // block adds (the norms view needs attention_out and ffn_out), and past that the residual stream alone.
    // floats per layer: 6 of dim (norms, branch outputs, residuals), q and attention.heads, k and v, ffn_hidden
    const int64_t perPosition = 6 * c.dim + 2 * c.q_dim() + 2 * c.kv_dim() + c.hidden_dim;
    const int64_t all = 4 * T * c.n_layers * perPosition;
    const int64_t contributions = 4 * T * c.n_layers * 3 * c.dim;
    if (all <= kTraceBudgetBytes) {
        // `all` keeps the logits too: name every tensor instead when they are too large to keep.
        request.all = request.keep_logits;
        if (!request.all)
            for (const TracedShape& s : trace_shapes(c, T))
                if (s.name != "logits" && !s.name.ends_with(".attention.probs")) request.names.insert(s.name);
    } else if (contributions <= kTraceBudgetBytes) {
        for (int64_t l = 0; l < c.n_layers; ++l)
            for (const char* what : {"attention_out", "h", "ffn_out"}) request.names.insert(names::layer(l, what));
    }
    return request;
}

QString EngineWorker::tokenText(int32_t id) const { return displayToken(model_->tokenizer, id); }

void EngineWorker::run(qint64 id, const QString& prompt, bool logitLens, const AblationList& ablations) {
    runTokens(id, prompt, {}, logitLens, ablations);
}

std::vector<int32_t> EngineWorker::promptTokens(const QString& text) const {
    std::vector<int32_t> tokens{model_->config.bos_id};
    const std::vector<int32_t> body = model_->tokenizer.encode(text.toStdString());
    tokens.insert(tokens.end(), body.begin(), body.end());
    return tokens;
}

std::shared_ptr<RunResult> EngineWorker::prefillRun(qint64 id, const QString& prompt, const std::vector<int32_t>& tokens,
                                                    const Interventions& interventions, bool lens) {
    const ModelConfig& c = model_->config;
    auto r = std::make_shared<RunResult>();
    r->id = id;
    r->prompt = prompt;
    r->tokens = tokens;
    const int64_t T = int64_t(r->tokens.size());  // positions
    const int64_t cap = std::min<int64_t>(c.max_seq_len, 4096);
    if (T > cap) throw InputError("the prompt has " + std::to_string(T) + " tokens; the explorer takes at most " +
                                  std::to_string(cap));

    // Estimated and refused before the cache, the step's buffers or the trace are allocated.
    const uint64_t limit = memoryLimit_.load();
    MemoryAvailable available;
    available.backendName = backend_->info().backend;
    available.backendOnHost = available.backendName == "cpu";
    available.host = limit ? limit : host_memory_available();
    available.backend = limit ? limit : backend_->memory_available();
    const std::string problem =
        runMemoryProblem(c, T, lens, available, [&](int64_t n) { return explorerRequest(c, n); });
    if (!problem.empty()) throw InputError(problem);

    TraceRequest request = explorerRequest(c, T);
    request.interventions = interventions;
    // Each position's softmax statistics, from the logits rows piece by piece as the step computes them.
    request.on_logits = [&r, V = c.vocab_size](int64_t, std::span<const float> rows) {
        for (size_t i = 0; i + size_t(V) <= rows.size(); i += size_t(V)) {
            const analysis::LogitStats st = analysis::logit_stats(rows.subspan(i, size_t(V)));
            r->logSumExp.push_back(st.log_sum_exp);
            r->entropy.push_back(st.entropy);
        }
    };
    KVCache cache(*backend_, c, T);
    QElapsedTimer timer;
    timer.start();
    r->trace = transformer_->prefill(cache, r->tokens, request, &abort_);
    r->seconds = double(timer.nsecsElapsed()) * 1e-9;
    r->hasProbs = request.attention_probs;
    for (int32_t tok : r->tokens) r->tokenTexts << tokenText(tok);
    for (const auto& row : r->trace.top_k)
        for (const TokenScore& s : row) r->vocabText.emplace(s.id, tokenText(s.id));
    return r;
}

RunResultPtr EngineWorker::plainRun(qint64 id, const QString& label, const std::vector<int32_t>& tokens) {
    if (plainCache_ && plainCache_->tokens == tokens) return plainCache_;
    plainCache_.reset();  // one kept trace at a time
    auto r = prefillRun(id, label, tokens, {});
    plainCache_ = r;
    return r;
}

Interventions EngineWorker::resolve(const AblationList& ablations, const Trace* clean) const {
    Interventions out;
    for (const AblationSpec& a : ablations) {
        for (Intervention& iv : parse_ablation(a.spec.toStdString(), model_->config)) {
            if (a.mean) {
                if (!clean) throw InputError("mean ablation of " + a.spec.toStdString() + " needs the plain run");
                Intervention m = mean_ablation(iv, *clean);
                m.label = iv.label.empty() ? a.label().toStdString() : iv.label + " (mean)";
                out.push_back(std::move(m));
            } else {
                out.push_back(std::move(iv));
            }
        }
    }
    return out;
}

Interventions EngineWorker::resolveFor(qint64 id, const AblationList& ablations, const std::vector<int32_t>& tokens) {
    const bool needsClean = std::any_of(ablations.begin(), ablations.end(), [](const AblationSpec& a) { return a.mean; });
    if (!needsClean) return resolve(ablations, nullptr);
    return resolve(ablations, &plainRun(id, QString(), tokens)->trace);
}

// Empty `tokens`: <|begin_of_text|> + the prompt as plain text.
void EngineWorker::runTokens(qint64 id, const QString& prompt, const std::vector<int32_t>& tokens, bool logitLens,
                             const AblationList& ablations) {
    beginTask(id);
    const QString what = ablations.empty() ? tr("running the prompt") : tr("running the prompt with the ablations");
    if (!transformer_) {
        emit failed(id, what, tr("no model is open"));
        return;
    }
    try {
        const ModelConfig& c = model_->config;
        const std::vector<int32_t> seq = tokens.empty() ? promptTokens(prompt) : tokens;
        std::shared_ptr<RunResult> r;
        if (ablations.empty()) {
            plainCache_.reset();
            r = prefillRun(id, prompt, seq, {}, logitLens);
            plainCache_ = r;  // the clean run of an ablation asked for next
        } else {
            // The plain pass first (kept for the diff and for mean ablation), then the intervened one.
            const RunResultPtr clean = plainRun(id, prompt, seq);
            r = prefillRun(id, prompt, seq, resolve(ablations, &clean->trace), logitLens);
            r->ablations = ablations;
            r->clean = clean;
        }
        const int64_t T = int64_t(r->tokens.size());
        emit runFinished(r);

        if (!logitLens) return;
        // Logit lens: x0 and every h.N through the final norm and output, after the run is shown.
        auto lens = std::make_shared<LensResult>();
        lens->runId = id;
        lens->rows = c.n_layers + 1;
        lens->positions = T;
        // On the backend: the same rmsnorm and matmul kernels as the forward pass (the GPU with Vulkan), a chunk
        // of traced rows at a time.
        const analysis::TopTokens top = analysis::logit_lens_top(*transformer_, r->trace, &abort_);
        lens->top = top.id;
        lens->prob = top.prob;
        for (int32_t tok : lens->top) lens->vocabText.emplace(tok, tokenText(tok));
        emit lensFinished(lens);
    } catch (const Cancelled&) {
        emit cancelled(id, what);
    } catch (const std::exception& e) {
        emit failed(id, what, QString::fromUtf8(e.what()));
    }
}

void EngineWorker::nearest(qint64 id, int token, int k) {
    beginTask(id);
    const QString what = tr("finding the tokens nearest to %1").arg(token);
    if (!model_) {
        emit failed(id, what, tr("no model is open"));
        return;
    }
    try {
        const TensorView& emb = model_->tensor("tok_embeddings");
        if (token < 0 || token >= emb.rows()) throw InputError("token id " + std::to_string(token) + " is out of range");
        if (embeddingNorms_.empty()) embeddingNorms_ = analysis::row_norms(emb, &abort_);
        auto r = std::make_shared<NearestResult>();
        r->id = id;
        r->token = token;
        r->tokenText = tokenText(token);
        r->row.resize(size_t(emb.cols()));
        emb.row_to_f32(token, r->row.data());
        r->nearest = analysis::nearest_rows(emb, embeddingNorms_, r->row, k, &abort_);
        for (const auto& [tok, cos] : r->nearest) r->vocabText.emplace(tok, tokenText(tok));
        emit nearestFinished(r);
    } catch (const Cancelled&) {
        emit cancelled(id, what);
    } catch (const std::exception& e) {
        emit failed(id, what, QString::fromUtf8(e.what()));
    }
}

void EngineWorker::weightPreview(qint64 id, const QString& name, int maxRows, int maxCols) {
    beginTask(id);
    const QString what = tr("reading %1").arg(name);
    if (!model_) {
        emit failed(id, what, tr("no model is open"));
        return;
    }
    try {
        const TensorView& w = model_->tensor(name.toStdString());
        const analysis::Reduced red = analysis::reduce_max_abs(w, maxRows, maxCols, &abort_);
        auto p = std::make_shared<WeightPreview>();
        p->id = id;
        p->name = name;
        p->dtype = q(dtype_name(w.dtype));
        p->rows = w.shape.size() < 2 ? 1 : w.rows();
        p->cols = w.cols();
        p->outRows = red.rows;
        p->outCols = red.cols;
        p->rowStep = red.row_step;
        p->colStep = red.col_step;
        p->data = red.data;
        emit weightPreviewFinished(p);
    } catch (const Cancelled&) {
        emit cancelled(id, what);
    } catch (const std::exception& e) {
        emit failed(id, what, QString::fromUtf8(e.what()));
    }
}

void EngineWorker::exportWeight(qint64 id, const QString& name, const QString& file) {
    beginTask(id);
    const QString what = tr("exporting %1").arg(name);
    if (!model_) {
        emit failed(id, what, tr("no model is open"));
        return;
    }
    try {
        const TensorView& w = model_->tensor(name.toStdString());
        const std::vector<float> data = w.to_f32();
        write_npy(fsPath(file), data, w.shape);
        emit weightExported(id, file);
    } catch (const std::exception& e) {
        emit failed(id, what, QString::fromUtf8(e.what()));
    }
}

}  // namespace strata::ui
