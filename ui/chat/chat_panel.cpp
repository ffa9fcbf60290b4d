#include "chat/chat_panel.hpp"

#include <algorithm>
#include <limits>

#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QKeyEvent>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>

#include "chat/chat_client.hpp"
#include "chat/chat_engine.hpp"
#include "chat/chat_settings.hpp"
#include "chat/chat_transcript.hpp"
#include "chat/conversation.hpp"
#include "chat/token_details.hpp"
#include "logits/sampling_controls.hpp"
#include "views/plot_util.hpp"

namespace strata::ui {

namespace {

QString stopNote(const ChatOutcome& o, int64_t maxTokens) {
    switch (o.stop) {
        case StopReason::EndToken: return o.generated == 0 ? QObject::tr("ended its turn at once") : QObject::tr("ended its turn");
        case StopReason::MaxTokens: return QObject::tr("reached the %1-token limit").arg(maxTokens);
        case StopReason::Cancelled: return QObject::tr("stopped");
        case StopReason::ContextFull: return QObject::tr("the context is full");
    }
    return {};
}

}  // namespace

ChatPanel::ChatPanel(EngineClient* engine, QWidget* parent) : QWidget(parent) {
    conversation_ = new Conversation(this);
    client_ = new ChatClient(engine, this);
    buildLayout();

    loadingSettings_ = true;
    setSettings(loadChatSettings());
    system_->setPlainText(loadSystemPrompt());
    loadingSettings_ = false;
    conversation_->setSystemPrompt(system_->toPlainText());

    connect(client_, &ChatClient::started, this, &ChatPanel::onStarted);
    connect(client_, &ChatClient::token, this, &ChatPanel::onToken);
    connect(client_, &ChatClient::finished, this, &ChatPanel::onFinished);
    connect(transcript_, &ChatTranscript::tokenClicked, this, &ChatPanel::openToken);
    connect(transcript_, &ChatTranscript::editRequested, this, &ChatPanel::editMessage);
    connect(transcript_, &ChatTranscript::regenerateRequested, this, &ChatPanel::regenerate);
    connect(transcript_, &ChatTranscript::tokenHovered, this, [this](int entry, int index) {
        if (entry < 0) {
            // Back to the token clicked last, or the newest while streaming.
            if (pinned_.first >= 0 && pinned_.first < conversation_->size() &&
                pinned_.second < int(conversation_->entry(pinned_.first).tokens.size()))
                details_->setToken(conversation_->entry(pinned_.first).tokens[size_t(pinned_.second)]);
            return;
        }
        details_->setToken(conversation_->entry(entry).tokens[size_t(index)]);
    });
    connect(conversation_, &Conversation::reset, this, [this] {
        pinned_ = {-1, -1};
        details_->setToken(nullptr);
        transcript_->setSelectedToken(-1, -1);
        updateButtons();
    });
    connect(send_, &QPushButton::clicked, this, &ChatPanel::send);
    connect(stop_, &QPushButton::clicked, this, &ChatPanel::stop);
    connect(regenerate_, &QPushButton::clicked, this, &ChatPanel::regenerate);
    connect(clear_, &QPushButton::clicked, this, &ChatPanel::clearConversation);
    connect(openToken_, &QPushButton::clicked, this, [this] {
        if (pinned_.first >= 0) openToken(pinned_.first, pinned_.second);
    });
    connect(explainToken_, &QPushButton::clicked, this, [this] {
        if (pinned_.first >= 0) explainToken(pinned_.first, pinned_.second);
    });
    connect(ablateButton_, &QPushButton::clicked, this, [this] { ablateHeadAndRegenerate(ablateLayer_->value(), ablateHead_->value()); });
    connect(clearAblations_, &QPushButton::clicked, this, [this] { setAblations({}); });
    connect(mode_, &QComboBox::currentIndexChanged, this, [this](int i) {
        setMode(i == 0 ? ChatMode::Chat : ChatMode::Completion);
    });
    connect(system_, &QPlainTextEdit::textChanged, this, [this] {
        conversation_->setSystemPrompt(system_->toPlainText());
        if (!loadingSettings_) saveSystemPrompt(system_->toPlainText());
    });
    connect(sampling_, &SamplingControls::changed, this, &ChatPanel::saveSettings);
    for (QSpinBox* s : {seed_, maxTokens_, context_}) connect(s, &QSpinBox::valueChanged, this, &ChatPanel::saveSettings);
    connect(kvCache_, &QComboBox::currentIndexChanged, this, &ChatPanel::saveSettings);
    input_->installEventFilter(this);  // Ctrl+Enter sends
    setModel(nullptr);
}

ChatPanel::~ChatPanel() {
    // A reply still streaming stops between tokens; its signals have nowhere to go.
    client_->stop();
}

void ChatPanel::buildLayout() {
    // Left: the conversation.
    modelLabel_ = new QLabel;
    demoNote_ = new QLabel;
    demoNote_->setStyleSheet(QStringLiteral("QLabel { background: #fff3cd; color: #664d03; border: 1px solid #ffe69c; padding: 2px 6px; }"));
    demoNote_->setVisible(false);
    mode_ = new QComboBox;
    mode_->addItem(tr("Chat (Llama 3 instruct template)"));
    mode_->addItem(tr("Completion (continue a document)"));
    mode_->setToolTip(tr("Instruct models converse through the chat template; base models continue text"));
    auto* top = new QHBoxLayout;
    top->addWidget(modelLabel_);
    top->addWidget(demoNote_, 1);
    top->addWidget(mode_);

    systemLabel_ = new QLabel(tr("System prompt"));
    system_ = new QPlainTextEdit;
    system_->setPlaceholderText(tr("Instructions the model sees before the conversation (empty: none)"));
    system_->setFixedHeight(system_->fontMetrics().lineSpacing() * 3 + 12);

    transcript_ = new ChatTranscript(conversation_);

    banner_ = new QLabel;
    banner_->setWordWrap(true);
    banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    banner_->setVisible(false);

    input_ = new QPlainTextEdit;
    input_->setFixedHeight(input_->fontMetrics().lineSpacing() * 4 + 12);
    send_ = new QPushButton(tr("Send"));
    send_->setToolTip(tr("Send the message (Ctrl+Enter)"));
    send_->setDefault(true);
    stop_ = new QPushButton(tr("Stop"));
    stop_->setToolTip(tr("Stop generating: the reply keeps the tokens so far"));
    regenerate_ = new QPushButton(tr("Regenerate"));
    regenerate_->setToolTip(tr("Generate the last reply again, with the next seed"));
    clear_ = new QPushButton(tr("Clear"));
    clear_->setToolTip(tr("Start a new conversation"));
    auto* buttons = new QGridLayout;
    buttons->addWidget(send_, 0, 0);
    buttons->addWidget(stop_, 0, 1);
    buttons->addWidget(regenerate_, 1, 0);
    buttons->addWidget(clear_, 1, 1);
    auto* inputRow = new QHBoxLayout;
    inputRow->addWidget(input_, 1);
    inputRow->addLayout(buttons);

    status_ = new QLabel;
    status_->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* left = new QWidget;
    auto* lv = new QVBoxLayout(left);
    lv->setContentsMargins(6, 6, 6, 4);
    lv->setSpacing(4);
    lv->addLayout(top);
    lv->addWidget(systemLabel_);
    lv->addWidget(system_);
    lv->addWidget(transcript_, 1);
    lv->addWidget(banner_);
    lv->addLayout(inputRow);
    lv->addWidget(status_);

    // Right: sampling settings and the token under the mouse.
    sampling_ = new SamplingControls(Qt::Vertical);
    seed_ = new QSpinBox;
    seed_->setRange(0, std::numeric_limits<int>::max());
    seed_->setToolTip(tr("The sampler's seed: the same seed, settings and conversation give the same reply. "
                         "Regenerate uses the next seeds."));
    maxTokens_ = new QSpinBox;
    maxTokens_->setRange(1, 1 << 20);
    maxTokens_->setToolTip(tr("The longest reply, in tokens"));
    context_ = new QSpinBox;
    context_->setRange(16, 1 << 20);
    context_->setSingleStep(256);
    context_->setToolTip(tr("Positions in the KV cache: the conversation and the reply must fit in them"));
    kvCache_ = new QComboBox;
    kvCache_->setObjectName(QStringLiteral("chatKvCache"));
    kvCache_->addItems({tr("float32"), tr("binary16")});
    kvCache_->setToolTip(tr("How the KV cache keeps keys and values: float32 (their true values, as the explorer "
                            "shows them) or binary16 (half the memory of a long conversation, each key and value "
                            "rounded once; on a GPU half the bytes attention reads)"));
    auto* more = new QFormLayout;
    more->setContentsMargins(0, 0, 0, 0);
    more->addRow(tr("seed"), seed_);
    more->addRow(tr("max tokens"), maxTokens_);
    // One row for both (the window's least height is what a laptop screen allows): positions, then their values.
    auto* contextRow = new QHBoxLayout;
    contextRow->setContentsMargins(0, 0, 0, 0);
    contextRow->addWidget(context_, 1);
    contextRow->addWidget(kvCache_);
    more->addRow(tr("context, KV cache"), contextRow);
    auto* defaults = new QPushButton(tr("Defaults"));
    connect(defaults, &QPushButton::clicked, this, [this] {
        ChatSettings d;
        d.contextLength = model_ ? ChatEngine::defaultContext(model_->config) : 0;
        setSettings(d);
    });
    auto* samplingBox = new QGroupBox(tr("Sampling"));
    auto* sv = new QVBoxLayout(samplingBox);
    sv->addWidget(sampling_);
    sv->addLayout(more);
    sv->addWidget(defaults, 0, Qt::AlignRight);

    details_ = new TokenDetails;
    openToken_ = new QPushButton(tr("Open in Explorer"));
    openToken_->setToolTip(tr("Run the conversation up to the selected token with every tensor kept, and show the "
                              "step that chose it"));
    explainToken_ = new QPushButton(tr("What Made This Token?"));
    explainToken_->setObjectName(QStringLiteral("explainToken"));
    explainToken_->setToolTip(tr("Direct logit attribution of the selected token at the step that chose it: how much x0, "
                                 "every head and every feed_forward added to its logit (the explorer's Attribution view)"));
    auto* tokenButtons = new QHBoxLayout;
    tokenButtons->addStretch(1);
    tokenButtons->addWidget(explainToken_);
    tokenButtons->addWidget(openToken_);
    auto* tokenBox = new QGroupBox(tr("Generated token"));
    auto* tv = new QVBoxLayout(tokenBox);
    tv->addWidget(details_, 1);
    tv->addLayout(tokenButtons);

    // Ablation: a head zeroed for the whole reply, then the reply again.
    ablateLayer_ = new QSpinBox;
    ablateLayer_->setPrefix(tr("layer "));
    ablateHead_ = new QSpinBox;
    ablateHead_->setPrefix(tr("head "));
    ablateButton_ = new QPushButton(tr("Ablate && Regenerate"));
    ablateButton_->setObjectName(QStringLiteral("ablateRegenerate"));
    ablateButton_->setToolTip(tr("Zero this head's output (layers.L.attention.heads.H) in every step, prompt included, "
                                 "and generate the last reply again with the same seed"));
    clearAblations_ = new QPushButton(tr("Clear"));
    ablationsLabel_ = new QLabel;
    ablationsLabel_->setMinimumWidth(40);
    auto* ablateRow = new QHBoxLayout;
    ablateRow->addWidget(new QLabel(tr("Ablate")));
    ablateRow->addWidget(ablateLayer_);
    ablateRow->addWidget(ablateHead_);
    ablateRow->addWidget(ablateButton_);
    ablateRow->addWidget(clearAblations_);
    ablateRow->addWidget(ablationsLabel_, 1);
    lv->insertLayout(lv->indexOf(status_), ablateRow);  // under the message box

    auto* right = new QWidget;
    auto* rv = new QVBoxLayout(right);
    rv->setContentsMargins(6, 6, 6, 4);
    rv->addWidget(samplingBox);
    rv->addWidget(tokenBox, 1);

    auto* split = new QSplitter(Qt::Horizontal);
    split->addWidget(left);
    split->addWidget(right);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 0);
    split->setSizes({1100, 480});
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(split);
}

bool ChatPanel::eventFilter(QObject* watched, QEvent* e) {
    if (watched == input_ && e->type() == QEvent::KeyPress) {
        auto* k = static_cast<QKeyEvent*>(e);
        if ((k->key() == Qt::Key_Return || k->key() == Qt::Key_Enter) && (k->modifiers() & Qt::ControlModifier)) {
            send();
            return true;
        }
    }
    return QWidget::eventFilter(watched, e);
}

void ChatPanel::setModel(const ModelSummaryPtr& model) {
    client_->stop();
    model_ = model;
    vocab_.reset();
    cacheTokens_.clear();
    editing_ = -1;
    banner_->hide();
    if (model) {
        const ModelConfig& c = model->config;
        modelLabel_->setText(tr("<b>%1</b> \u00b7 %2").arg(model->name.toHtmlEscaped(), c.is_instruct ? tr("instruct") : tr("base model")));
        demoNote_->setText(c.demo_trained
                               ? tr("demonstration model: a tiny Llama 3 trained on generated chats \u2014 it answers "
                                    "simple questions (capitals, colours, small sums, animal sounds, short stories)")
                               : tr("demonstration model: random weights, so the replies are noise \u2014 but every "
                                    "step of them can be opened and inspected"));
        demoNote_->setVisible(c.is_demo);
        context_->setMaximum(int(std::min<int64_t>(c.max_seq_len, 1 << 20)));
        ablateLayer_->setRange(0, int(c.n_layers) - 1);
        ablateHead_->setRange(0, int(c.n_heads) - 1);
        const ChatSettings saved = loadChatSettings();
        const int64_t ctx = saved.contextLength > 0 ? std::min(saved.contextLength, c.max_seq_len) : ChatEngine::defaultContext(c);
        loadingSettings_ = true;
        context_->setValue(int(ctx));
        loadingSettings_ = false;
        contextLength_ = ctx;
        mode_->setCurrentIndex(c.is_instruct ? 0 : 1);
        setMode(c.is_instruct ? ChatMode::Chat : ChatMode::Completion);
    } else {
        modelLabel_->setText(tr("No model is open"));
        demoNote_->hide();
    }
    setAblations({});  // specs name the old model's layers and heads
    conversation_->clear();
    contextUsed_ = 0;
    replyTokens_ = 0;
    tokensPerSecond_ = 0;
    updateButtons();
    updateStatus();
}

void ChatPanel::setMode(ChatMode mode) {
    if (mode_->currentIndex() != (mode == ChatMode::Chat ? 0 : 1)) {
        mode_->setCurrentIndex(mode == ChatMode::Chat ? 0 : 1);  // comes back here through the signal
        return;
    }
    if (conversation_->streaming()) client_->stop();
    conversation_->setMode(mode);
    const bool chat = mode == ChatMode::Chat;
    system_->setVisible(chat);
    systemLabel_->setVisible(chat);
    input_->setPlaceholderText(chat ? tr("Message the model (Ctrl+Enter to send)")
                                    : tr("Text for the model to continue (Ctrl+Enter; empty: continue the document)"));
    send_->setText(chat ? tr("Send") : tr("Continue"));
    updateButtons();
}

ChatSettings ChatPanel::settings() const {
    ChatSettings s;
    s.sampler = sampling_->settings();
    s.sampler.seed = uint64_t(seed_->value());
    s.maxTokens = maxTokens_->value();
    s.contextLength = context_->value();
    s.kvCacheF16 = kvCache_->currentIndex() == 1;
    return s;
}

void ChatPanel::setSettings(const ChatSettings& s) {
    const bool was = loadingSettings_;
    loadingSettings_ = true;
    sampling_->setSettings(s.sampler);
    seed_->setValue(int(std::min<uint64_t>(s.sampler.seed, uint64_t(seed_->maximum()))));
    maxTokens_->setValue(int(std::clamp<int64_t>(s.maxTokens, 1, maxTokens_->maximum())));
    if (s.contextLength > 0) context_->setValue(int(std::min<int64_t>(s.contextLength, context_->maximum())));
    kvCache_->setCurrentIndex(s.kvCacheF16 ? 1 : 0);
    loadingSettings_ = was;
    saveSettings();
}

void ChatPanel::saveSettings() {
    if (loadingSettings_) return;
    saveChatSettings(settings());
}

bool ChatPanel::generating() const { return client_->running(); }

void ChatPanel::send() {
    if (!model_ || generating()) return;
    const QString text = input_->toPlainText();
    const bool chat = conversation_->mode() == ChatMode::Chat;
    if (chat && text.trimmed().isEmpty()) return;
    before_ = conversation_->entries();
    pendingText_ = text;
    pendingEditing_ = editing_;
    if (editing_ >= 0) {
        conversation_->truncate(editing_);
        editing_ = -1;
    }
    if (chat || !text.isEmpty()) conversation_->addUser(text);
    input_->clear();
    startReply(0);
}

void ChatPanel::regenerate() {
    if (!model_ || generating()) return;
    const int last = conversation_->lastReply();
    if (last < 0 || last != conversation_->size() - 1) return;
    const int attempt = conversation_->entry(last).attempt + 1;
    before_ = conversation_->entries();
    pendingText_.clear();
    pendingEditing_ = -1;
    conversation_->truncate(last);
    startReply(attempt);
}

void ChatPanel::startReply(int attempt) {
    banner_->hide();
    const ChatSettings s = settings();
    ChatRequest request = conversation_->request(s, attempt);
    for (const QString& spec : ablations_) request.ablations.push_back(spec.toStdString());
    conversation_->beginReply(request.sampler, attempt);
    replyTokens_ = 0;
    tokensPerSecond_ = 0;
    prefillSeconds_ = 0;
    client_->generate(std::move(request));
    updateButtons();
    updateStatus();
    emit replyStarted();
}

void ChatPanel::stop() { client_->stop(); }

void ChatPanel::clearConversation() {
    client_->stop();
    editing_ = -1;
    banner_->hide();
    conversation_->clear();
    replyTokens_ = 0;
    updateStatus();
}

void ChatPanel::editMessage(int entry) {
    if (generating() || entry < 0 || entry >= conversation_->size()) return;
    if (conversation_->entry(entry).role != QLatin1String("user")) return;
    editing_ = entry;
    input_->setPlainText(conversation_->entry(entry).content);
    input_->setFocus();
    showBanner(tr("Editing a message: Send replaces it and everything after it; Clear starts over."), false);
}

void ChatPanel::showToken(int entry, int index) {
    if (entry < 0 || entry >= conversation_->size()) return;
    const ChatEntry& e = conversation_->entry(entry);
    if (index < 0 || index >= int(e.tokens.size())) return;
    pinned_ = {entry, index};
    transcript_->setSelectedToken(entry, index);
    details_->setToken(e.tokens[size_t(index)]);
    updateButtons();
}

TokenOpen ChatPanel::tokenOpen(int entry, int index) const {
    TokenOpen open;
    if (entry < 0 || entry >= conversation_->size() || index < 0 || index >= int(conversation_->entry(entry).tokens.size()))
        return open;
    const std::vector<int32_t> tokens = conversation_->tokensThrough(entry, index);
    if (tokens.size() < 2) return open;
    const ChatEntry& e = conversation_->entry(entry);
    const ChatTokenPtr& t = e.tokens[size_t(index)];
    open.tokens = tokens;
    open.step = int(tokens.size()) - 2;
    open.id = t->id;
    open.sampler = e.sampler;
    open.label = tr("the conversation up to \u2018%1\u2019 (%2 tokens)")
                     .arg(vocab_ ? vocab_->displayOf(t->id) : QString::number(t->id))
                     .arg(tokens.size());
    return open;
}

void ChatPanel::openToken(int entry, int index) {
    const TokenOpen open = tokenOpen(entry, index);
    if (open.tokens.empty()) return;
    showToken(entry, index);
    emit openTokenRequested(open);
}

void ChatPanel::explainToken(int entry, int index) {
    const TokenOpen open = tokenOpen(entry, index);
    if (open.tokens.empty()) return;
    showToken(entry, index);
    emit attributeTokenRequested(open);
}

void ChatPanel::setAblations(const std::vector<QString>& specs) {
    ablations_ = specs;
    QStringList names;
    for (const QString& s : specs) names << s;
    const QString text = names.isEmpty() ? tr("none: the model as it is")
                                         : tr("in force: %1 (zero)").arg(names.join(QStringLiteral(", ")));
    ablationsLabel_->setText(text);
    ablationsLabel_->setToolTip(text);
    updateButtons();
}

void ChatPanel::ablateHeadAndRegenerate(int layer, int head) {
    const QString spec = QStringLiteral("layers.%1.attention.heads.%2").arg(layer).arg(head);
    std::vector<QString> next = ablations_;
    if (std::find(next.begin(), next.end(), spec) == next.end()) next.push_back(spec);
    setAblations(next);
    // The same seed as the reply being replaced: the difference is the ablation, not the sampling.
    const int last = conversation_->lastReply();
    if (model_ && !generating() && last >= 0 && last == conversation_->size() - 1) {
        const int attempt = conversation_->entry(last).attempt;
        before_ = conversation_->entries();
        pendingText_.clear();
        pendingEditing_ = -1;
        conversation_->truncate(last);
        startReply(attempt);
    }
}

void ChatPanel::onStarted(const ChatStartPtr& start) {
    vocab_ = start->vocab;
    transcript_->setVocabulary(vocab_);
    details_->setVocabulary(vocab_);
    conversation_->setReplyPrompt(start->promptTokens, start->reusedTokens);
    promptTokens_ = int64_t(start->promptTokens.size());
    reusedTokens_ = start->reusedTokens;
    prefillSeconds_ = start->prefillSeconds;
    contextLength_ = start->contextLength;
    kvCacheF16_ = start->kvCacheF16;
    contextUsed_ = promptTokens_;
    updateStatus();
}

void ChatPanel::onToken(const ChatTokenPtr& token) {
    conversation_->appendToken(token);
    replyTokens_ = token->index + 1;
    contextUsed_ = token->contextUsed;
    if (token->decodeSeconds > 0) tokensPerSecond_ = replyTokens_ / token->decodeSeconds;
    if (pinned_.first < 0) details_->setToken(token);  // follow the newest token until one is clicked
    updateStatus();
}

void ChatPanel::onFinished(const ChatOutcomePtr& outcome) {
    const ChatOutcome& o = *outcome;
    cacheTokens_ = o.cacheTokens;
    contextUsed_ = int64_t(o.cacheTokens.size());
    if (o.contextLength > 0) contextLength_ = o.contextLength;
    tokensPerSecond_ = o.tokensPerSecond;
    const bool nothing = o.generated == 0;
    if (!o.error.isEmpty() || (nothing && o.stop == StopReason::Cancelled)) {
        // Nothing was generated: drop the empty reply; when the message itself was the problem, the conversation
        // goes back to what it was and the message back into the box.
        conversation_->finishReply(o, QString());
        conversation_->truncate(conversation_->size() - 1);
        if (o.doesNotFit) {
            conversation_->setEntries(before_);
            input_->setPlainText(pendingText_);
            editing_ = pendingEditing_;
        }
        if (!o.error.isEmpty()) showBanner(o.error, true);
        else showBanner(tr("Stopped before the first token."), false);
    } else {
        QString note = stopNote(o, settings().maxTokens);
        conversation_->finishReply(o, note);
        if (o.stop == StopReason::ContextFull)
            showBanner(tr("The context is full (%1 tokens): clear the conversation or raise the context length to go on.")
                           .arg(o.contextLength),
                       true);
    }
    updateButtons();
    updateStatus();
    emit replyFinished();
}

void ChatPanel::showBanner(const QString& text, bool error) {
    banner_->setText(text);
    banner_->setStyleSheet(error ? QStringLiteral("QLabel { background: #f8d7da; color: #58151c; border: 1px solid #f1aeb5; padding: 4px 8px; }")
                                 : QStringLiteral("QLabel { background: #e7f1ff; color: #0a3a7a; border: 1px solid #b6d4fe; padding: 4px 8px; }"));
    banner_->show();
}

QString ChatPanel::bannerText() const { return banner_->isHidden() ? QString() : banner_->text(); }

void ChatPanel::updateButtons() {
    const bool busy = generating();
    const bool ready = model_ != nullptr;
    send_->setEnabled(ready && !busy);
    stop_->setEnabled(busy);
    const int last = conversation_->lastReply();
    regenerate_->setEnabled(ready && !busy && last >= 0 && last == conversation_->size() - 1);
    clear_->setEnabled(ready && conversation_->size() > 0);
    openToken_->setEnabled(pinned_.first >= 0);
    explainToken_->setEnabled(pinned_.first >= 0);
    ablateButton_->setEnabled(ready && !busy);
    clearAblations_->setEnabled(!ablations_.empty());
    mode_->setEnabled(ready && !busy);
}

void ChatPanel::updateStatus() {
    QStringList parts;
    if (contextLength_ > 0)
        parts << (kvCacheF16_ ? tr("context %1 / %2 (binary16 KV cache)") : tr("context %1 / %2"))
                     .arg(groupDigits(qulonglong(contextUsed_)), groupDigits(qulonglong(contextLength_)));
    if (generating() && replyTokens_ == 0) parts << tr("reading the prompt\u2026");
    if (replyTokens_ > 0 || tokensPerSecond_ > 0) {
        parts << tr("%1 tokens").arg(replyTokens_);
        parts << tr("%1 tokens/s").arg(tokensPerSecond_, 0, 'f', 1);
    }
    if (promptTokens_ > 0)
        parts << tr("prompt %1 tokens, %2 reused from the KV cache, %3 fed in %4 ms")
                     .arg(promptTokens_)
                     .arg(reusedTokens_)
                     .arg(promptTokens_ - reusedTokens_)
                     .arg(prefillSeconds_ * 1000.0, 0, 'f', 0);
    status_->setText(parts.join(QStringLiteral(" \u00b7 ")));
}

QString ChatPanel::statusText() const { return status_->text(); }

}  // namespace strata::ui
