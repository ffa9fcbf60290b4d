#pragma once
// The logits of the explorer's selected position, fetched from the engine worker for the logits explorer and the
// logit lens (which share it): the full row over the vocabulary (copied from the run's trace when it kept every
// position's logits, else computed from the kept final-norm row), and on request the logit lens there. Requests
// go out only while one of its views is shown, one at a time, the newest winning.
#include <QObject>
#include <QString>

#include "chat/chat_types.hpp"
#include "explorer/explorer_state.hpp"

namespace strata::ui {

class EngineClient;

class LogitsSource : public QObject {
    Q_OBJECT
public:
    LogitsSource(ExplorerState* state, EngineClient* engine, QObject* parent = nullptr);

    ExplorerState* state() const { return state_; }
    // The current position's logits (nullptr until they arrive), and its lens (nullptr until asked for and done).
    const PositionLogitsPtr& logits() const { return logits_; }
    const PositionLogitsPtr& lens() const { return lens_; }
    VocabularyPtr vocab() const { return logits_ ? logits_->vocab : nullptr; }
    bool busy() const { return logitsId_ != 0; }
    bool lensBusy() const { return lensId_ != 0; }
    QString error() const { return error_; }

    int position() const;          // the selected position, clamped to the run
    int32_t actualNext() const;    // the run's token after the position, -1 at the end
    int32_t tokenAt(int position) const;

    // A view is shown (requests go out) or hidden.
    void setActive(QObject* view, bool shown);
    // Computes the logit lens at the current position.
    void requestLens();

signals:
    void logitsChanged();
    void lensChanged();
    void busyChanged();

private:
    void schedule();
    void request();
    bool matches(const PositionLogitsPtr& r) const;

    ExplorerState* state_;
    EngineClient* engine_;
    PositionLogitsPtr logits_, lens_;
    qint64 logitsId_ = 0, lensId_ = 0;
    bool scheduled_ = false;
    QList<QObject*> shown_;
    QString error_;
};

}  // namespace strata::ui
