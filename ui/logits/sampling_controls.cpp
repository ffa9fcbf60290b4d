#include "logits/sampling_controls.hpp"

#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>

namespace strata::ui {

SamplingControls::SamplingControls(Qt::Orientation orientation, QWidget* parent) : QWidget(parent) {
    temperature_ = new QDoubleSpinBox;
    temperature_->setRange(0.0, 5.0);
    temperature_->setSingleStep(0.05);
    temperature_->setDecimals(2);
    temperature_->setSpecialValueText(tr("0 (greedy)"));
    temperature_->setToolTip(tr("softmax(logits / temperature): below 1 sharpens the distribution, above 1 flattens "
                                "it; 0 always takes the most likely token"));
    topK_ = new QSpinBox;
    topK_->setRange(0, 1 << 20);
    topK_->setSpecialValueText(tr("off"));
    topK_->setToolTip(tr("Keep only the k most likely tokens (0: off)"));
    topP_ = new QDoubleSpinBox;
    topP_->setRange(0.01, 1.0);
    topP_->setSingleStep(0.01);
    topP_->setDecimals(2);
    topP_->setToolTip(tr("Nucleus: keep the smallest set of most likely tokens whose probability reaches p (1: off)"));
    minP_ = new QDoubleSpinBox;
    minP_->setRange(0.0, 1.0);
    minP_->setSingleStep(0.01);
    minP_->setDecimals(2);
    minP_->setSpecialValueText(tr("off"));
    minP_->setToolTip(tr("Drop tokens less likely than min-p times the most likely one (0: off)"));

    const QString labels[] = {tr("temperature"), tr("top-k"), tr("top-p"), tr("min-p")};
    QWidget* fields[] = {temperature_, topK_, topP_, minP_};
    if (orientation == Qt::Horizontal) {
        auto* row = new QHBoxLayout(this);
        row->setContentsMargins(0, 0, 0, 0);
        row->setSpacing(4);
        for (int i = 0; i < 4; ++i) {
            row->addWidget(new QLabel(labels[i]));
            row->addWidget(fields[i]);
            if (i < 3) row->addSpacing(6);
        }
    } else {
        auto* form = new QFormLayout(this);
        form->setContentsMargins(0, 0, 0, 0);
        for (int i = 0; i < 4; ++i) form->addRow(labels[i], fields[i]);
    }
    setSettings({1.0f, 0, 1.0f, 0.0f, 0});

    auto emitChanged = [this] {
        if (!setting_) emit changed(settings());
    };
    connect(temperature_, &QDoubleSpinBox::valueChanged, this, emitChanged);
    connect(topK_, &QSpinBox::valueChanged, this, emitChanged);
    connect(topP_, &QDoubleSpinBox::valueChanged, this, emitChanged);
    connect(minP_, &QDoubleSpinBox::valueChanged, this, emitChanged);
}

SamplerSettings SamplingControls::settings() const {
    SamplerSettings s;
    s.temperature = float(temperature_->value());
    s.top_k = topK_->value();
    s.top_p = float(topP_->value());
    s.min_p = float(minP_->value());
    return s;
}

void SamplingControls::setSettings(const SamplerSettings& s) {
    const SamplerSettings before = settings();
    setting_ = true;
    temperature_->setValue(s.temperature);
    topK_->setValue(int(std::min<int64_t>(s.top_k, topK_->maximum())));
    topP_->setValue(s.top_p);
    minP_->setValue(s.min_p);
    setting_ = false;
    const SamplerSettings after = settings();
    if (before.temperature != after.temperature || before.top_k != after.top_k || before.top_p != after.top_p ||
        before.min_p != after.min_p)
        emit changed(after);
}

}  // namespace strata::ui
