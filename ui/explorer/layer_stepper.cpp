#include "explorer/layer_stepper.hpp"

#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QStyle>
#include <QTimer>
#include <QToolButton>

namespace strata::ui {

LayerStepper::LayerStepper(QWidget* parent) : QWidget(parent) {
    prev_ = new QToolButton;
    prev_->setIcon(style()->standardIcon(QStyle::SP_MediaSeekBackward));
    prev_->setToolTip(tr("Previous layer ( [ or Page Up )"));
    next_ = new QToolButton;
    next_->setIcon(style()->standardIcon(QStyle::SP_MediaSeekForward));
    next_->setToolTip(tr("Next layer ( ] or Page Down )"));
    play_ = new QToolButton;
    play_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
    play_->setToolTip(tr("Play through the layers (P)"));
    slider_ = new QSlider(Qt::Horizontal);
    slider_->setTickPosition(QSlider::TicksBelow);
    slider_->setPageStep(1);
    label_ = new QLabel;
    label_->setMinimumWidth(fontMetrics().horizontalAdvance(QStringLiteral("layers.00 of 00")) + 8);
    timer_ = new QTimer(this);
    timer_->setInterval(700);

    auto* l = new QHBoxLayout(this);
    l->setContentsMargins(4, 0, 4, 0);
    l->addWidget(new QLabel(tr("Layer")));
    l->addWidget(prev_);
    l->addWidget(play_);
    l->addWidget(next_);
    l->addWidget(slider_, 1);
    l->addWidget(label_);

    connect(prev_, &QToolButton::clicked, this, &LayerStepper::previous);
    connect(next_, &QToolButton::clicked, this, &LayerStepper::next);
    connect(play_, &QToolButton::clicked, this, &LayerStepper::togglePlay);
    connect(slider_, &QSlider::valueChanged, this, [this](int v) {
        updateLabel();
        emit layerRequested(v);
    });
    connect(timer_, &QTimer::timeout, this, [this] {
        if (slider_->value() + 1 >= count_) {
            togglePlay();  // stop at the last layer
            return;
        }
        next();
    });
    setLayerCount(0);
}

void LayerStepper::setLayerCount(int n) {
    count_ = n;
    const QSignalBlocker block(slider_);
    slider_->setRange(0, std::max(0, n - 1));
    setEnabled(n > 0);
    if (timer_->isActive() && n == 0) togglePlay();
    updateLabel();
}

void LayerStepper::setLayer(int layer) {
    const QSignalBlocker block(slider_);
    slider_->setValue(layer);
    updateLabel();
}

int LayerStepper::layer() const { return slider_->value(); }

bool LayerStepper::playing() const { return timer_->isActive(); }

void LayerStepper::setInterval(int ms) { timer_->setInterval(ms); }

void LayerStepper::previous() { slider_->setValue(slider_->value() - 1); }

void LayerStepper::next() { slider_->setValue(slider_->value() + 1); }

void LayerStepper::togglePlay() {
    if (timer_->isActive()) {
        timer_->stop();
        play_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
        return;
    }
    if (count_ == 0) return;
    if (slider_->value() + 1 >= count_) slider_->setValue(0);  // play again from the first block
    timer_->start();
    play_->setIcon(style()->standardIcon(QStyle::SP_MediaPause));
}

void LayerStepper::updateLabel() {
    label_->setText(count_ ? tr("layers.%1 of %2").arg(slider_->value()).arg(count_) : tr("no model"));
}

}  // namespace strata::ui
