#pragma once
// The frame every view shares: a title row with view-specific controls and the export buttons (PNG of the
// view, .npy of the tensor it shows), the view's canvas, and a read-out line for what is under the mouse.
// Each view names the annotation card shown beside it.
#include <cstdint>
#include <vector>

#include <QHBoxLayout>
#include <QWidget>

#include "explorer/explorer_state.hpp"

class QLabel;

namespace strata::ui {

class EngineClient;

class ViewPage : public QWidget {
    Q_OBJECT
public:
    ViewPage(const QString& title, ExplorerState* state, EngineClient* client, QWidget* parent = nullptr);

    QString title() const { return title_; }
    // The short name on the view's tab (the title when unset).
    QString tabName() const { return tabName_.isEmpty() ? title_ : tabName_; }
    void setTabName(const QString& name) { tabName_ = name; }
    // The card beside this view, for what it shows now (resources/cards/<id>.json).
    virtual QString cardId() const = 0;
    // The tensor shown (full precision, not the reduced display), for .npy export.
    struct TensorExport {
        QString name;
        std::vector<float> data;
        std::vector<int64_t> shape;
    };
    virtual TensorExport tensorExport() const { return {}; }
    // Writes the .npy; views whose tensor lives in the engine (weights) ask the worker instead.
    virtual void exportNpy(const QString& file);
    bool savePng(const QString& file);
    QString readout() const;
    // Whether the view has something to show (used by tests and the screenshot run).
    virtual bool hasContent() const = 0;

signals:
    void cardChanged();
    void message(const QString& text);

protected:
    void setCanvas(QWidget* canvas);
    void setReadout(const QString& text);
    QHBoxLayout* controls() const { return controls_; }
    QWidget* canvas() const { return canvas_; }

    ExplorerState* state_;
    EngineClient* client_;

private:
    void askPng();
    void askNpy();

    QString title_;
    QString tabName_;
    QHBoxLayout* controls_;
    QWidget* canvas_ = nullptr;
    QLabel* readout_;
};

}  // namespace strata::ui
