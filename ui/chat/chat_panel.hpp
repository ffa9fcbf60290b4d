#pragma once
// The Chat tab: a conversation with the loaded model. An editable system prompt, the transcript (tokens stream in
// and each can be clicked), the message box with Send / Stop / Regenerate / Clear, edit-and-resend on any of the
// person's messages, sampling settings that persist, and a live line with tokens/s and the context used. Base
// models get a completion mode (the model continues a document). What was kept about a generated token shows
// beside the transcript; clicking the token asks the main window to open that step in the explorer.
#include <vector>

#include <QWidget>

#include "chat/chat_types.hpp"
#include "worker/worker_types.hpp"

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace strata::ui {

class ChatClient;
class ChatTranscript;
class Conversation;
struct ChatEntry;
class EngineClient;
class SamplingControls;
class TokenDetails;

// A generated token to open in the explorer: the tokens the model had seen once it produced it, and the step
// that chose it (position - 1, whose logits it was sampled from).
struct TokenOpen {
    std::vector<int32_t> tokens;  // [0 .. position]
    int step = 0;                 // position - 1
    int32_t id = 0;
    QString label;                // for the status bar
    SamplerSettings sampler;      // what the reply was sampled with
};

class ChatPanel : public QWidget {
    Q_OBJECT
public:
    explicit ChatPanel(EngineClient* engine, QWidget* parent = nullptr);
    ~ChatPanel() override;

    // A model was opened (nullptr: none): the conversation starts over, in chat or completion mode.
    void setModel(const ModelSummaryPtr& model);

    void send();            // sends the message box (or, when editing, replaces that message and what follows)
    void stop();
    void regenerate();      // the last reply again, with the next seed
    void clearConversation();
    void editMessage(int entry);
    void openToken(int entry, int index);  // emits openTokenRequested
    // "What made this token": emits attributeTokenRequested for the token (its step's attribution).
    void explainToken(int entry, int index);
    // Zero-ablation specs in force for the chat's replies (every step, the prompt included).
    void setAblations(const std::vector<QString>& specs);
    const std::vector<QString>& ablations() const { return ablations_; }
    // Adds "layers.L.attention.heads.H" (from the spin boxes) and regenerates the last reply.
    void ablateHeadAndRegenerate(int layer, int head);
    TokenOpen tokenOpen(int entry, int index) const;  // empty tokens when there is none
    void showToken(int entry, int index);  // marks it and shows what was kept about it, without opening it
    void setMode(ChatMode mode);

    ChatSettings settings() const;
    void setSettings(const ChatSettings& settings);

    Conversation* conversation() const { return conversation_; }
    ChatTranscript* transcript() const { return transcript_; }
    TokenDetails* details() const { return details_; }
    QPlainTextEdit* input() const { return input_; }
    QPlainTextEdit* systemPrompt() const { return system_; }
    QPushButton* sendButton() const { return send_; }
    QPushButton* stopButton() const { return stop_; }
    SamplingControls* sampling() const { return sampling_; }
    bool generating() const;
    QString statusText() const;
    QString bannerText() const;
    // What the KV cache held after the last reply (the worker's word for it).
    const std::vector<int32_t>& cacheTokens() const { return cacheTokens_; }

protected:
    bool eventFilter(QObject* watched, QEvent* e) override;

signals:
    void openTokenRequested(const strata::ui::TokenOpen& open);
    void attributeTokenRequested(const strata::ui::TokenOpen& open);
    void replyStarted();
    void replyFinished();

private:
    void buildLayout();
    void startReply(int attempt);
    void onStarted(const ChatStartPtr& start);
    void onToken(const ChatTokenPtr& token);
    void onFinished(const ChatOutcomePtr& outcome);
    void showBanner(const QString& text, bool error);
    void updateButtons();
    void updateStatus();
    void saveSettings();

    Conversation* conversation_;
    ChatClient* client_;
    ChatTranscript* transcript_;
    TokenDetails* details_;
    SamplingControls* sampling_;
    QSpinBox* seed_;
    QSpinBox* maxTokens_;
    QSpinBox* context_;
    QComboBox* kvCache_;  // float32 / binary16
    QComboBox* mode_;
    QLabel* modelLabel_;
    QLabel* demoNote_;
    QPlainTextEdit* system_;
    QLabel* systemLabel_;
    QPlainTextEdit* input_;
    QPushButton* send_;
    QPushButton* stop_;
    QPushButton* regenerate_;
    QPushButton* clear_;
    QPushButton* openToken_;
    QPushButton* explainToken_;
    QSpinBox* ablateLayer_;
    QSpinBox* ablateHead_;
    QPushButton* ablateButton_;
    QPushButton* clearAblations_;
    QLabel* ablationsLabel_;
    std::vector<QString> ablations_;
    QLabel* banner_;
    QLabel* status_;

    ModelSummaryPtr model_;
    VocabularyPtr vocab_;
    int editing_ = -1;              // the message being edited, -1 when none
    // Before a message is sent: the conversation, the message box and the edit, put back when it does not fit.
    std::vector<ChatEntry> before_;
    QString pendingText_;
    int pendingEditing_ = -1;
    std::vector<int32_t> cacheTokens_;
    int64_t contextLength_ = 0;
    bool kvCacheF16_ = false;  // the last reply's cache held binary16
    int64_t contextUsed_ = 0;
    int64_t promptTokens_ = 0, reusedTokens_ = 0;
    double prefillSeconds_ = 0.0, tokensPerSecond_ = 0.0;
    int replyTokens_ = 0;
    std::pair<int, int> pinned_{-1, -1};  // the token clicked last (shown when the mouse leaves the tokens)
    bool loadingSettings_ = false;
};

}  // namespace strata::ui

Q_DECLARE_METATYPE(strata::ui::TokenOpen)
