#pragma once
// Stepping through the blocks: a slider, previous/next buttons and play/pause (a QTimer that advances one layer
// per tick and stops at the last). The window binds the keyboard shortcuts ([ and ], Page Up/Down, P).
#include <QWidget>

class QLabel;
class QSlider;
class QTimer;
class QToolButton;

namespace strata::ui {

class LayerStepper : public QWidget {
    Q_OBJECT
public:
    explicit LayerStepper(QWidget* parent = nullptr);
    void setLayerCount(int n);
    void setLayer(int layer);
    int layer() const;
    bool playing() const;
    void setInterval(int ms);

public slots:
    void previous();
    void next();
    void togglePlay();

signals:
    void layerRequested(int layer);

private:
    void updateLabel();
    QSlider* slider_;
    QToolButton* prev_;
    QToolButton* next_;
    QToolButton* play_;
    QLabel* label_;
    QTimer* timer_;
    int count_ = 0;
};

}  // namespace strata::ui
